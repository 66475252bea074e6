"""Parity of jaxmb's muscle lengths and moment arms with OpenSim 4.6, per muscle, at every
stored state of a reference file of tests/data/opensim/opensim_reference.py.

    .venv/bin/python tests/data/opensim/parity_report.py jaxmb/data/arm26.osim tests/data/opensim/arm26.npz
    .venv/bin/python tests/data/opensim/parity_report.py ../shared/models/MOBL_ARMS_fixed_41.osim \
        tests/data/opensim/mobl_arms.npz --muscles TMIN,ECRL,SUBSC,ECRB

Prints the skeleton's errors first (body poses over the sweep states; M and inverse
dynamics at the random states, relative to the largest entry), then, per muscle, max |L - L_OpenSim| over the sweep states, max |R - R_FD| over the
sweep states where `sweep_fd_smooth` (R about the swept coordinate), and max |R - R_FD|
over the random states (every coordinate, where `random_fd_smooth`). R is the
closed form (`mb.muscle_lengths_and_moment_arms`), R_FD OpenSim's -dL/dq by central
differences. `--muscles` keeps only those muscles (a smaller graph to compile);
`--wrap-geometry converged` compares load_osim's default geometry instead of OpenSim's
iterates (docs/opensim-parity.md, "Converged wrap geometry").
"""

import argparse
import warnings

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402

import jaxmb as mb  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("reference")
    ap.add_argument("--muscles", default="", help="comma-separated muscle names (default: all)")
    ap.add_argument("--wrap-geometry", default="opensim", choices=("opensim", "converged"),
                    help="load_osim's wrap_geometry: OpenSim's iterates (default, as the parity tests) or "
                         "the converged geometry (load_osim's own default)")
    args = ap.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mb.load_osim(args.model, wrap_geometry=args.wrap_geometry)
    d = np.load(args.reference)
    _skeleton(args.model, d)
    if not model.muscles:
        return
    names = list(d["muscle_names"])
    if args.muscles:
        keep = args.muscles.split(",")
        model = eqx.tree_at(lambda m: m.muscles, model, tuple(m for m in model.muscles if m.name in keep))
    cols = [names.index(m.name) for m in model.muscles]
    f = jax.jit(lambda qs: jax.lax.map(lambda q: mb.muscle_lengths_and_moment_arms(model, q), qs))
    length, r = (np.asarray(a) for a in f(jnp.asarray(d["sweep_q_ind"])))
    c = d["sweep_coordinate"]
    r_sweep = r[np.arange(len(c)), c, :]
    smooth = d["sweep_fd_smooth"][:, cols]
    dl = np.abs(length - d["sweep_muscle_lengths"][:, cols])
    dr = np.where(smooth, np.abs(r_sweep - d["sweep_moment_arms_fd"][:, cols]), 0.0)
    _, rr = (np.asarray(a) for a in f(jnp.asarray(d["random_q_ind"])))
    rsmooth = d["random_fd_smooth"][:, :, cols]
    drr = np.where(rsmooth, np.abs(rr - d["random_moment_arms_fd"][:, :, cols]), 0.0)
    print(f"{len(c)} sweep states ({int((~smooth).sum())} non-smooth (state, muscle) pairs excluded), "
          f"{len(rr)} random states ({int((~rsmooth).sum())} non-smooth entries excluded)")
    print(f"{'muscle':10s} {'max|dL| sweep':>14s} {'max|dR| sweep':>14s} {'max|dR| random':>15s}")
    for k, m in enumerate(model.muscles):
        print(f"{m.name:10s} {dl[:, k].max():14.2e} {dr[:, k].max():14.2e} {drr[:, :, k].max():15.2e}")


def _skeleton(path, d):
    """Body poses over the sweep states, and M and inverse dynamics at the random states
    (relative to the largest entry), as tests/test_osim_skeleton.py compares them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imp = mb.io.read_osim(path, muscles=False)
    model = imp.model
    rows = jnp.asarray([model.body_index(b) for b in d["body_names"]])
    poses = jax.jit(jax.vmap(lambda q: mb.body_transforms(model, q)[rows]))(jnp.asarray(d["sweep_q_ind"]))
    dynamics = jax.jit(jax.vmap(lambda q, qd, qdd: (mb.mass_matrix(model, q), mb.inverse_dynamics(model, q, qd, qdd))))
    m, tau = dynamics(*(jnp.asarray(d[k]) for k in ("random_q_ind", "random_qd_ind", "random_qdd_ind")))

    def relative(got, want):
        return np.abs(np.asarray(got) - want).max() / max(np.abs(want).max(), np.finfo(float).tiny)

    print(f"poses over {len(d['sweep_q_ind'])} sweep states: max |pose - OpenSim| "
          f"{np.abs(np.asarray(poses) - d['sweep_body_poses']).max():.1e}; at {len(d['random_q_ind'])} random "
          f"states, relative: M {relative(m, d['random_mass_matrix_ind']):.1e}, inverse dynamics "
          f"{relative(tau, d['random_tau_random_acc_ind']):.1e}")


if __name__ == "__main__":
    main()
