"""jaxmb vs OpenSim 4.6 moment arms of the MoBL-ARMS shoulder group leaders, and the
MoBL-ARMS parity table (per muscle and per wrap type).

    python docs/make_moment_arm_figures.py

Run from anywhere with jaxmb installed (`pip install -e .`; or `PYTHONPATH=.` from the
repository root). Needs `../shared/models/MOBL_ARMS_fixed_41.osim` next to the
repository (MoBL-ARMS is not shipped) and compiles for minutes. Evaluates lengths and
R = -dL/dq (closed form) at every stored sweep state of
tests/data/opensim/mobl_arms.npz, compares them with OpenSim's lengths and its
-dL/dq by central differences (where `sweep_fd_smooth`), and writes, whatever the
working directory, docs/figures/mobl_shoulder_{shoulder_elv,shoulder_rot}.png (the
group leaders of Ehsani (2016), Table 5, as in its Fig. 14-15), which the OpenSim
parity page shows, and docs/figures/mobl_parity.json (every number per muscle; not
part of the site).
"""

import json
import pathlib
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import jaxmb as mb  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODEL = ROOT.parent / "shared" / "models" / "MOBL_ARMS_fixed_41.osim"
REF = ROOT / "tests" / "data" / "opensim" / "mobl_arms.npz"
OUT = ROOT / "docs" / "figures"
LEADERS = ("LAT1", "PECM3", "DELT1", "PECM1", "SUBSC", "DELT2")  # Ehsani (2016), Table 5


def main():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mb.load_osim(MODEL)
    d = np.load(REF)
    names = list(d["muscle_names"])
    assert tuple(names) == model.muscle_names
    f = jax.jit(lambda qs: jax.lax.map(lambda q: mb.muscle_lengths_and_moment_arms(model, q), qs))
    qs = jnp.asarray(d["sweep_q_ind"])
    t = time.perf_counter()
    length, r = (np.asarray(a) for a in f(qs))
    print(f"{len(qs)} sweep states in {time.perf_counter() - t:.1f} s (with compilation)")
    c = d["sweep_coordinate"]
    r_sweep = r[np.arange(len(qs)), c, :]
    smooth = d["sweep_fd_smooth"]
    len_err = np.abs(length - d["sweep_muscle_lengths"])
    r_err = np.where(smooth, np.abs(r_sweep - d["sweep_moment_arms_fd"]), 0.0)
    kinds = {m.name: sorted({type(w).__name__[4:] for w in m.wraps}) or ["none"] for m in model.muscles}
    per_muscle = {}
    for k, n in enumerate(names):
        per_muscle[n] = {"wraps": kinds[n], "n_wraps": len(model.muscles[k].wraps),
                         "max_dL": float(len_err[:, k].max()), "median_dL": float(np.median(len_err[:, k])),
                         "max_dR": float(r_err[:, k].max()), "median_dR": float(np.median(r_err[smooth[:, k], k])),
                         "frac_dR_lt_1e-6": float(np.mean(r_err[smooth[:, k], k] < 1e-6)),
                         "frac_dL_lt_1e-7": float(np.mean(len_err[:, k] < 1e-7))}
    groups = {}
    for n, v in per_muscle.items():
        key = "+".join(v["wraps"]) + (" (multi)" if v["n_wraps"] > 1 else "")
        groups.setdefault(key, []).append(n)
    print(f"{'wrap kinds':32s} {'n':>3s} {'max|dL| m':>10s} {'max|dR| m':>10s} {'dL<1e-7':>8s} {'dR<1e-6':>8s}")
    table = []
    for key, ms in sorted(groups.items()):
        ks = [names.index(m) for m in ms]
        sm = smooth[:, ks]
        row = {"wraps": key, "muscles": ms, "max_dL": float(len_err[:, ks].max()),
               "max_dR": float(r_err[:, ks].max()),
               "frac_dL_lt_1e-7": float(np.mean(len_err[:, ks] < 1e-7)),
               "frac_dR_lt_1e-6": float(np.mean(r_err[:, ks][sm] < 1e-6))}
        table.append(row)
        print(f"{key:32s} {len(ms):3d} {row['max_dL']:10.2e} {row['max_dR']:10.2e} "
              f"{row['frac_dL_lt_1e-7']:8.1%} {row['frac_dR_lt_1e-6']:8.1%}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "mobl_parity.json").write_text(json.dumps({"per_muscle": per_muscle, "per_wrap_kind": table},
                                                     indent=1))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for coord in ("shoulder_elv", "shoulder_rot"):
        ci = model.coordinate_index(coord)
        sel = c == ci
        x = np.degrees(d["sweep_value"][sel])
        fig, axes = plt.subplots(2, 3, figsize=(12, 6.5), sharex=True)
        for ax, name in zip(axes.ravel(), LEADERS):
            k = names.index(name)
            ax.plot(x, 100 * r_sweep[sel, k], "-", color="C0", lw=2, label="jaxmb (closed form)")
            fd = np.where(smooth[sel, k], d["sweep_moment_arms_fd"][sel, k], np.nan)
            ax.plot(x, 100 * fd, "--", color="C3", lw=1.2, label="OpenSim 4.6, -dL/dq (FD)")
            ax.plot(x, 100 * d["sweep_moment_arms_opensim"][sel, k], ":", color="0.4", lw=1,
                    label="OpenSim computeMomentArm")
            ax.set_title(f"{name} ({'+'.join(kinds[name])})")
            ax.grid(alpha=0.3)
        for ax in axes[1]:
            ax.set_xlabel(f"{coord} (deg)")
        for ax in axes[:, 0]:
            ax.set_ylabel("moment arm (cm)")
        axes[0, 0].legend(fontsize=7)
        fig.suptitle(f"MoBL-ARMS shoulder moment arms about {coord} (others at default)")
        fig.tight_layout()
        fig.savefig(OUT / f"mobl_shoulder_{coord}.png", dpi=110)
        plt.close(fig)
        print("wrote", OUT / f"mobl_shoulder_{coord}.png")


if __name__ == "__main__":
    main()
