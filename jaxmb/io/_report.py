"""``jaxmb moment-arms MODEL.osim --coordinate NAME --out DIR``: a CSV and a plot."""

from __future__ import annotations

import pathlib

import numpy as np


def moment_arm_report(model_path, coordinate: str, out_dir, n: int = 181) -> pathlib.Path:
    """Sweep `coordinate` over its range (others at their defaults) and write
    ``moment_arms_<coordinate>.csv`` (one column per muscle, R = -dL/dq in m) and a PNG
    of the muscles that cross it. Returns the CSV path."""
    from .. import _muscles
    from ._osim import load_osim

    model = load_osim(model_path)
    if not model.muscles:
        raise ValueError(f"{model_path}: the model has no muscles, so there are no moment arms to report.")
    values, arms = _muscles.moment_arm_sweep(model, coordinate, n=n)
    values, arms = np.asarray(values), np.asarray(arms)
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv = out / f"moment_arms_{coordinate}.csv"
    header = ",".join([coordinate] + list(model.muscle_names))
    np.savetxt(csv, np.column_stack([values, arms]), delimiter=",", header=header, comments="")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    crossing = [k for k in range(arms.shape[1]) if np.max(np.abs(arms[:, k])) > 1e-6]
    fig, ax = plt.subplots(figsize=(8, 5))
    for k in crossing:
        ax.plot(np.degrees(values), 100 * arms[:, k], label=model.muscle_names[k])
    ax.set_xlabel(f"{coordinate} [deg]")
    ax.set_ylabel("moment arm -dL/dq [cm]")
    ax.set_title(f"{pathlib.Path(model_path).name}: moment arms about {coordinate}")
    if crossing and len(crossing) <= 20:
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out / f"moment_arms_{coordinate}.png", dpi=120)
    plt.close(fig)
    print(f"wrote {csv} and {out / f'moment_arms_{coordinate}.png'} ({len(crossing)} of "
          f"{arms.shape[1]} muscles cross {coordinate})")
    return csv
