"""Reports written by the command line: ``jaxmb moment-arms MODEL.osim --coordinate NAME``
(a CSV and a plot), and the helpers the commands share (coordinate units, CSV headers
with units, plots of many curves in grouped panels)."""

from __future__ import annotations

import math
import os
import pathlib

import numpy as np

# Curves per panel: a legend of more names stops being readable.
_PER_PANEL = 8
# Panels per figure: more curves are shared among these panels.
_MAX_PANELS = 12


def coordinate_units(model) -> tuple[str, ...]:
    """The unit of each coordinate of `model`: ``"rad"`` or ``"m"``.

    A coordinate is rotational when a revolute joint's function reads it, else
    translational when a prismatic joint's does. One that moves no joint is
    rotational, OpenSim's default motion type.

    **Returns:** a tuple of ``"rad"`` or ``"m"``, one per coordinate in the order of
    ``model.coordinate_names``.
    """
    kinds: list[set[str]] = [set() for _ in model.coordinate_names]
    for joint in model.joints:
        for k in joint.function.coordinate_indices():
            kinds[k].add(joint.kind)
    return tuple("m" if kind == {"prismatic"} else "rad" for kind in kinds)


def write_csv(path, columns: list[tuple[str, str]], data) -> pathlib.Path:
    """Write `data` (rows, one column per entry of `columns`) with the header
    ``name [unit],...``. **Returns:** `path`."""
    path = pathlib.Path(path)
    header = ",".join(f"{name} [{unit}]" for name, unit in columns)
    np.savetxt(path, np.asarray(data), delimiter=",", header=header, comments="")
    return path


def curve_groups(n: int) -> list[list[int]]:
    """Indices of `n` curves split into panels of at most ``_PER_PANEL`` (more when
    ``_MAX_PANELS`` panels would not hold them), keeping their order."""
    if n == 0:
        return []
    per = max(_PER_PANEL, math.ceil(n / _MAX_PANELS))
    return [list(range(start, min(start + per, n))) for start in range(0, n, per)]


def plot_groups(axes, x, ys, names, groups, ylabel: str):
    """Draw the curves ``ys[:, k]`` against `x`, ``groups[i]`` on ``axes[i]``, each
    panel with its legend outside the axes, on the right."""
    for ax, group in zip(axes, groups):
        for k in group:
            ax.plot(x, ys[:, k], label=names[k])
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)


def moment_arm_report(model_path, coordinate: str, out_dir, n: int = 181, stages=None,
                      wrap_geometry: str = "converged", frozen_path: bool = False,
                      function_paths: str | os.PathLike | None = None) -> pathlib.Path:
    """Sweep `coordinate` over its range (others at their defaults) and write
    ``moment_arms_<coordinate>.csv`` and ``moment_arms_<coordinate>.png`` into `out_dir`.

    **Arguments:**

    - `model_path`: an OpenSim ``.osim`` file.
    - `coordinate`: the name of one of its independent coordinates.
    - `out_dir`: the output folder (made if missing, after the model loaded).
    - `n`: the number of sweep points, >= 2.
    - `stages`: progress display of the command line (anything with ``start(name)``
      and ``detail(text)``), or None.
    - `wrap_geometry`, `function_paths`: as for `load_osim`.
    - `frozen_path`: report OpenSim's computeMomentArm (`moment_arm_sweep`'s
      ``method="frozen_path"``, what OpenSim's MuscleAnalysis reports) instead of ``-dL/dq``,
      in ``moment_arms_<coordinate>_frozen_path.csv`` and ``.png``.

    The moment arms are ``-dL/dq`` along the coordinate by one forward-mode direction
    (`moment_arm_sweep`'s ``method="autodiff"``), the smallest program to compile for
    one row of R; the tests hold it equal to the closed form to round-off.

    The CSV has the coordinate (``[rad]`` or ``[m]``) and one column per muscle, its
    moment arm ``R = -dL/dq`` in m (dimensionless, written ``[m/m]``, for a
    translational coordinate); the plot shows the muscles that cross the coordinate in
    panels of a few muscles each, legends outside the axes.

    **Returns:** the CSV's path.
    """
    from .._muscles import moment_arm_sweep
    from ._osim import load_osim

    if n < 2:
        raise ValueError(f"moment_arm_report: n must be >= 2 sweep points, got {n}.")
    start = stages.start if stages is not None else (lambda name: None)
    start("loading the model")
    model = load_osim(model_path, wrap_geometry=wrap_geometry, function_paths=function_paths)
    name = pathlib.Path(model_path).name
    if not model.muscles:
        raise ValueError(f"{model_path}: the model has no muscles, so there are no moment arms to report.")
    k = model.coordinate_index(coordinate)
    unit = coordinate_units(model)[k]
    start("compiling and computing the moment arms")
    detail = stages.detail if stages is not None else None
    values, arms = moment_arm_sweep(model, coordinate, n=n, method="frozen_path" if frozen_path else "autodiff",
                                    progress=None if detail is None else (lambda i, m: detail(f"{i}/{m} states")))
    values, arms = np.asarray(values), np.asarray(arms)
    start("writing")
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    arm_unit = "m" if unit == "rad" else "m/m"
    stem = f"moment_arms_{coordinate}" + ("_frozen_path" if frozen_path else "")
    csv = write_csv(out / f"{stem}.csv",
                    [(coordinate, unit)] + [(m, arm_unit) for m in model.muscle_names],
                    np.column_stack([values, arms]))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    crossing = [j for j in range(arms.shape[1]) if np.max(np.abs(arms[:, j])) > 1e-6]
    groups = [[crossing[i] for i in g] for g in curve_groups(len(crossing))]
    x, xlabel = (np.degrees(values), f"{coordinate} [deg]") if unit == "rad" else (values, f"{coordinate} [m]")
    quantity = "computeMomentArm (frozen path)" if frozen_path else "-dL/dq"
    ylabel = f"{quantity} [cm]" if unit == "rad" else f"{quantity} [-]"
    scale = 100.0 if unit == "rad" else 1.0
    fig, axes = plt.subplots(max(len(groups), 1), 1, sharex=True, squeeze=False,
                             figsize=(9, 1.0 + 2.2 * max(len(groups), 1)))
    axes = axes[:, 0]
    plot_groups(axes, x, scale * arms, model.muscle_names, groups, ylabel)
    if not groups:
        axes[0].text(0.5, 0.5, f"no muscle crosses {coordinate}", ha="center", va="center",
                     transform=axes[0].transAxes)
    axes[-1].set_xlabel(xlabel)
    fig.suptitle(f"{name}: moment arms about {coordinate} ({len(crossing)} of {arms.shape[1]} muscles cross it)")
    fig.tight_layout()
    png = out / f"{stem}.png"
    fig.savefig(png, dpi=110, bbox_inches="tight")
    plt.close(fig)
    print(f"wrote {csv} and {png} ({len(crossing)} of {arms.shape[1]} muscles cross {coordinate})")
    return csv
