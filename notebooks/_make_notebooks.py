"""Write the notebooks with nbformat: `python notebooks/_make_notebooks.py [NAME ...]` (all by default).

The shoulder study is then executed in place (its outputs kept small):
`jupyter nbconvert --to notebook --execute --inplace notebooks/shoulder_study.ipynb`."""

from pathlib import Path

import nbformat as nbf

HERE = Path(__file__).parent

SETUP = """import os
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")
import jax
jax.config.update("jax_enable_x64", True)
import equinox as eqx
import jax.numpy as jnp
import numpy as np
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import jaxmb as mb
from jaxmb import models as C  # the built-in mechanisms"""

HERMITE = """def hermite(t, t1, a, b):
    \"\"\"Cubic Hermite from a to b over [0, t1] with zero end velocities: (q, q', q'').\"\"\"
    s = t / t1
    q = a + (b - a) * (3 * s**2 - 2 * s**3)
    qd = (b - a) * (6 * s - 6 * s**2) / t1
    qdd = (b - a) * (6 - 12 * s) / t1**2
    return q, qd, qdd"""

NOTEBOOKS = {
    "four_bar": [
        ("md", "# Four-bar linkage (Ehsani 2016, Eq. 121, Figs. 4-6)\n\n"
               "`q` is the centre-of-mass height of body 2; the three joint angles are implicit "
               "functions of q (Newton + implicit differentiation). Lengths: see `docs/how-to/closed-chains.md`."),
        ("code", SETUP),
        ("code", "model = mb.models.four_bar()\nclosure = model.joints[0].function.closure\n"
                 "qs = jnp.linspace(-2.0, 2.0, 201)[:, None]\n"
                 "f = eqx.filter_jit(jax.vmap(lambda q: mb.joint_values(model, q)))(qs)\n"
                 "plt.plot(qs[:, 0], f); plt.xlabel('q'); plt.ylabel('joint angle (rad)'); "
                 "plt.legend(model.joint_names); plt.title('Fig. 5: joint variables vs q');"),
        ("code", HERMITE + "\nts = jnp.linspace(0.0, 2.0, 101)\nq, qd, qdd = hermite(ts, 2.0, -1.8, 1.8)\n"
                 "body, point = 'link2', (5.0, 0.0, 0.0)  # point p: the joint between bodies 2 and 3\n"
                 "emb = eqx.filter_jit(jax.vmap(lambda a, b, c: (mb.point_velocity(model, a, b, body, point),"
                 " mb.point_acceleration(model, a, b, c, body, point))))\n"
                 "trad = eqx.filter_jit(jax.vmap(lambda a, b, c: mb.constraints.traditional_point_kinematics(model, a, b, c, body, point)[1:]))\n"
                 "ve, ae = emb(q[:, None], qd[:, None], qdd[:, None])\nvt, at = trad(q[:, None], qd[:, None], qdd[:, None])\n"
                 "print('max |v_embedded - v_traditional| =', float(jnp.max(jnp.abs(ve - vt))))\n"
                 "print('max |a_embedded - a_traditional| =', float(jnp.max(jnp.abs(ae - at))))\n"
                 "fig, ax = plt.subplots(1, 2, figsize=(9, 3))\n"
                 "ax[0].plot(ts, jnp.linalg.norm(ve, axis=1), lw=3); ax[0].plot(ts, jnp.linalg.norm(vt, axis=1), 'k:'); ax[0].set_title('|v_p|')\n"
                 "ax[1].plot(ts, jnp.linalg.norm(ae, axis=1), lw=3); ax[1].plot(ts, jnp.linalg.norm(at, axis=1), 'k:'); ax[1].set_title('|a_p|');"),
    ],
    "five_bar": [
        ("md", "# Five-bar linkage (Ehsani 2016, Eq. 123, Table 2, Figs. 7-11)\n\n"
               "`q = (theta1, theta2)`; theta3, theta4 implicit (branch sin theta4 > 0). "
               "Derivatives by implicit differentiation, the analytical projection method and the "
               "computational molecule."),
        ("code", SETUP),
        ("code", "model = mb.models.five_bar()\nclosure = model.joints[2].function.closure\n" + HERMITE +
                 "\nts = jnp.linspace(0.0, 2.0, 81)\n"
                 "q1, q1d, q1dd = hermite(ts, 2.0, 0.4, 1.2)\nq2, q2d, q2dd = hermite(ts, 2.0, -0.2, -0.9)\n"
                 "Q, QD, QDD = (jnp.stack(p, 1) for p in ((q1, q2), (q1d, q2d), (q1dd, q2dd)))\n"
                 "body, point = 'link3', (2.0, 0.0, 0.0)  # point p: on link 3 at l_p = 2 from joint 3\n"
                 "emb = eqx.filter_jit(jax.vmap(lambda a, b, c: (mb.point_velocity(model, a, b, body, point),"
                 " mb.point_acceleration(model, a, b, c, body, point))))\n"
                 "trad = eqx.filter_jit(jax.vmap(lambda a, b, c: mb.constraints.traditional_point_kinematics(model, a, b, c, body, point)[1:]))\n"
                 "ve, ae = emb(Q, QD, QDD); vt, at = trad(Q, QD, QDD)\n"
                 "print('max |dv| =', float(jnp.max(jnp.abs(ve - vt))), ' max |da| =', float(jnp.max(jnp.abs(ae - at))))\n"
                 "fig, ax = plt.subplots(1, 2, figsize=(9, 3))\n"
                 "ax[0].plot(ts, jnp.linalg.norm(ve, axis=1), lw=3); ax[0].plot(ts, jnp.linalg.norm(vt, axis=1), 'k:'); ax[0].set_title('Fig. 9: |v_p|')\n"
                 "ax[1].plot(ts, jnp.linalg.norm(ae, axis=1), lw=3); ax[1].plot(ts, jnp.linalg.norm(at, axis=1), 'k:'); ax[1].set_title('|a_p|');"),
        ("code", "proj = eqx.filter_jit(jax.vmap(lambda q: mb.constraints.projection_derivatives(closure, q)[1]))(Q)\n"
                 "mol = eqx.filter_jit(jax.vmap(lambda q: mb.constraints.molecule_derivatives(closure, q, 1e-4)[1]))(Q)\n"
                 "print('max |grad_projection - grad_molecule| =', float(jnp.max(jnp.abs(proj - mol))))\n"
                 "plt.plot(ts, jnp.linalg.norm(proj, axis=2), lw=3); plt.plot(ts, jnp.linalg.norm(mol, axis=2), 'k--')\n"
                 "plt.title('Fig. 10: |grad theta3|, |grad theta4|');"),
        ("code", "g1, g2 = jnp.meshgrid(jnp.linspace(-np.pi, np.pi, 61), jnp.linspace(-np.pi, np.pi, 61), indexing='ij')\n"
                 "th4 = eqx.filter_jit(jax.vmap(lambda q: mb.joint_values(model, q)[3]))(jnp.stack([g1.ravel(), g2.ravel()], 1))\n"
                 "plt.contourf(g1, g2, th4.reshape(g1.shape), 30); plt.colorbar(); plt.xlabel('theta1'); plt.ylabel('theta2')\n"
                 "plt.title('Fig. 11: theta4 manifold');"),
    ],
    "andrews_squeezer": [
        ("md", "# Andrews' squeezer (Ehsani 2016, section 4-4 B, Eq. 199, Fig. 18)\n\n"
               "Embedded ODE in `q = beta` (Hairer & Wanner's parameters), integrated with diffrax; "
               "compared with the Test Set reference at t = 0.03 s and with the index-1 DAE."),
        ("code", SETUP),
        ("code", "model = C.andrews_squeezer(throw=False)\nq0 = model.q_default  # the Test Set's consistent initial beta\n"
                 "ts = jnp.linspace(0.0, 0.05, 201)\n"
                 "# the driving torque and the spring are loads of the model\n"
                 "run = eqx.filter_jit(lambda m: mb.simulate(m, q0, jnp.zeros(1), 0.05, ts=ts, "
                 "rtol=1e-10, atol=1e-10, solver='dopri8'))\n"
                 "sol = run(model)\n"
                 "fig, ax = plt.subplots(1, 2, figsize=(9, 3))\nax[0].plot(ts, sol.q[:, 0]); ax[0].set_title('beta (rad)')\n"
                 "ax[1].plot(ts, sol.qd[:, 0]); ax[1].set_title(\"beta' (rad/s)\");"),
        ("code", "i = int(jnp.argmin(jnp.abs(ts - 0.03)))\n"
                 "angles = eqx.filter_jit(mb.joint_values)(model, sol.q[i])  # (beta, Theta, gamma, Phi, delta, Omega, epsilon)\n"
                 "# The Test Set for IVP Solvers (Mazzia & Magherini), problem 'andrews': the angles at t = 0.03 s\n"
                 "reference = np.array([0.1581077119629904e2, -0.1575637105984298e2, 0.4082224013073101e-1,\n"
                 "                      -0.5347301163226948, 0.5244099658805304, 0.5347301163226948, 0.1048080741042263e1])\n"
                 "rel = np.abs(np.asarray(angles) - reference) / np.abs(reference)\n"
                 "print('t =', float(ts[i]), ' significant digits vs Test Set:', -np.log10(rel.max()))"),
        ("md", "The dissertation starts from q = -0.0620 rad, q' = 0 and simulates 0..0.05 s. Any q is a "
               "consistent initial state of the embedded ODE (the six other angles follow from the loop), "
               "so no consistent-initialisation step is needed. Constraint residuals |g| along the run:"),
        ("code", "q0_dissertation = jnp.asarray([-0.0620])\n"
                 "run2 = eqx.filter_jit(lambda m: mb.simulate(m, q0_dissertation, jnp.zeros(1), 0.05, ts=ts, rtol=1e-10, "
                 "atol=1e-10, solver='dopri8'))\n"
                 "sol2 = run2(model)\n"
                 "closure = model.joints[1].function.closure\n"
                 "res = eqx.filter_jit(lambda c, qs: jax.vmap(c.solve)(qs))(closure, sol2.q)\n"
                 "print('max |g| along the trajectory:', float(res.residual.max()), ' all solved:', bool((res.result == mb.RESULTS.successful).all()))\n"
                 "fig, ax = plt.subplots(1, 2, figsize=(9, 3))\nax[0].plot(ts, sol2.q[:, 0]); ax[0].set_title('beta (rad), q0 = -0.0620')\n"
                 "ax[1].plot(ts, sol2.qd[:, 0]); ax[1].set_title(\"beta' (rad/s)\");\n"
                 "assert float(res.residual.max()) < 1e-10"),
    ],
}

NOTEBOOKS["double_pendulum"] = [
    ("md", "# Double pendulum (Watanabe and Duarte)\n\n"
           "Two uniform rods, `q = (theta1, theta2)` absolute angles from the downward vertical "
           "(`mb.models.double_pendulum`). The notes integrate `M(q) q'' = C + G + Q` with explicit "
           "Euler; here diffrax's Dopri8 integrates the same ODE, checked by energy conservation and "
           "by three independent routes to `M` and the bias forces."),
    ("code", SETUP),
    ("code", "model = C.double_pendulum()  # m1 = m2 = 1 kg, l1 = 1 m, l2 = 0.5 m\n"
             "q0, qd0 = jnp.array([np.pi / 2, np.pi / 2]), jnp.zeros(2)  # both rods horizontal, at rest\n"
             "ts = jnp.linspace(0.0, 20.0, 2001)\n"
             "sol = eqx.filter_jit(lambda m: mb.simulate(m, q0, qd0, 20.0, ts=ts, solver='dopri8', "
             "rtol=1e-12, atol=1e-12))(model)\n"
             "energy = jax.vmap(lambda q, qd: mb.kinetic_energy(model, q, qd) + mb.potential_energy(model, q))(sol.q, sol.qd)\n"
             "kinetic = jax.vmap(lambda q, qd: mb.kinetic_energy(model, q, qd))(sol.q, sol.qd)\n"
             "# E(0) = 0 J (at rest, potential energy zero at the pivot): the drift relative to the largest kinetic energy\n"
             "print('max |E - E0| / max T =', float(jnp.max(jnp.abs(energy - energy[0])) / jnp.max(kinetic)))\n"
             "fig, ax = plt.subplots(1, 2, figsize=(9, 3))\n"
             "ax[0].plot(ts, sol.q); ax[0].set_xlabel('t (s)'); ax[0].set_ylabel('angle (rad)'); "
             "ax[0].legend(['theta1', 'theta2'])\n"
             "ax[1].plot(ts, energy - energy[0]); ax[1].set_xlabel('t (s)'); ax[1].set_title('E(t) - E(0) (J)');"),
    ("md", "The notes' explicit Euler with a step of 1 ms, for comparison: its energy drifts, which "
           "the adaptive high-order integration does not."),
    ("code", "def euler(q, qd, dt, n):\n"
             "    def step(state, _):\n"
             "        q, qd = state\n"
             "        return (q + dt * qd, qd + dt * mb.forward_dynamics(model, q, qd)), None\n"
             "    return jax.lax.scan(step, (q, qd), None, length=n)[0]\n"
             "qe, qde = jax.jit(euler, static_argnums=(2, 3))(q0, qd0, 1e-3, 20000)\n"
             "e_euler = mb.kinetic_energy(model, qe, qde) + mb.potential_energy(model, qe)\n"
             "print('explicit Euler, 1 ms steps: energy change over 20 s', float(e_euler - energy[0]), 'J; Dopri8:',\n"
             "      float(energy[-1] - energy[0]), 'J')"),
    ("md", "## Three routes to the equations of motion\n\n"
           "`method='recursive'` (the default, Newton-Euler and composite inertias), `'autodiff'` "
           "(the Lagrangian differentiated by `jax.jacfwd`) and `'matrix_calculus'` (Ehsani 2016's "
           "Kronecker-product formulas) are independent; they agree to round-off at random states."),
    ("code", "key = jax.random.PRNGKey(0)\n"
             "qs, qds = jax.random.uniform(key, (2, 100, 2), minval=-3.0, maxval=3.0)\n"
             "def terms(method):\n"
             "    return eqx.filter_jit(jax.vmap(lambda q, qd: (mb.mass_matrix(model, q, method=method),\n"
             "                                                   mb.bias_forces(model, q, qd, method=method))))(qs, qds)\n"
             "rec, ad, mc = terms('recursive'), terms('autodiff'), terms('matrix_calculus')\n"
             "print('max |M_recursive - M_autodiff| =', float(jnp.max(jnp.abs(rec[0] - ad[0]))))\n"
             "print('max |M_recursive - M_matrix_calculus| =', float(jnp.max(jnp.abs(rec[0] - mc[0]))))\n"
             "print('max |bias_recursive - bias_autodiff| =', float(jnp.max(jnp.abs(rec[1] - ad[1]))))\n"
             "print('max |bias_recursive - bias_matrix_calculus| =', float(jnp.max(jnp.abs(rec[1] - mc[1]))))"),
]

NOTEBOOKS["three_link_arm"] = [
    ("md", "# Inverse dynamics of a three-link arm (Cesari, Shiratori, Olivato and Duarte 2001)\n\n"
           "The planar arm of upper arm, forearm and hand (`mb.models.three_link_arm`, `q = (alpha1, "
           "alpha2, alpha3)`: the upper arm from the horizontal, elbow and wrist relative) reaches "
           "against a horizontal spring on the hand. The joint moments of a minimum-jerk reach are "
           "decomposed as the study's Eq. 24, `T = M(a) a'' + v(a, a') + G(a) + T_ext` "
           "(`mb.inverse_dynamics_series`), and the forward dynamics driven by them gives the motion back."),
    ("code", SETUP),
    ("code", "model = C.three_link_arm(spring_force=10.0, spring_distance=0.05)  # a 10 N spring pulling the hand back\n"
             "T = 0.8  # s, the reach's duration\n"
             "start, target = jnp.array([-0.6, 1.6, 0.2]), jnp.array([0.3, 0.9, -0.1])  # rad\n"
             "def minimum_jerk(t):\n"
             "    s = t / T\n"
             "    d = target - start\n"
             "    return (start + d * (10 * s**3 - 15 * s**4 + 6 * s**5),\n"
             "            d * (30 * s**2 - 60 * s**3 + 30 * s**4) / T,\n"
             "            d * (60 * s - 180 * s**2 + 120 * s**3) / T**2)\n"
             "ts = jnp.linspace(0.0, T, 161)\n"
             "q, qd, qdd = jax.vmap(minimum_jerk)(ts)\n"
             "terms = eqx.filter_jit(mb.inverse_dynamics_series)(model, q, qd, qdd)\n"
             "fig, ax = plt.subplots(1, 3, figsize=(12, 3), sharex=True)\n"
             "for j, joint in enumerate(['shoulder', 'elbow', 'wrist']):\n"
             "    for name in ('inertial', 'velocity', 'gravity', 'external', 'total'):\n"
             "        ax[j].plot(ts, getattr(terms, name)[:, j], 'k' if name == 'total' else '-', label=name)\n"
             "    ax[j].set_title(f'{joint} moment (N m)'); ax[j].set_xlabel('t (s)')\n"
             "ax[2].legend(loc='center left', bbox_to_anchor=(1.0, 0.5));"),
    ("md", "## Two routes\n\nThe recursive route against the Lagrangian by automatic differentiation, "
           "and the forward dynamics driven by the total moment against the prescribed accelerations."),
    ("code", "ad = eqx.filter_jit(lambda m: mb.inverse_dynamics_series(m, q, qd, qdd, method='autodiff'))(model)\n"
             "print('max |T_recursive - T_autodiff| =', float(jnp.max(jnp.abs(terms.total - ad.total))))\n"
             "qdd_back = eqx.filter_jit(jax.vmap(lambda a, b, t: mb.forward_dynamics(model, a, b, t)))(q, qd, terms.total)\n"
             "print('max |forward(inverse(qdd)) - qdd| =', float(jnp.max(jnp.abs(qdd_back - qdd))))\n"
             "assert float(jnp.max(jnp.abs(qdd_back - qdd))) < 1e-9"),
    ("md", "## Simulating the reach\n\nDriven open-loop by the moments of the inverse dynamics at each "
           "time (`tau(t, q, qd)` = the total moment of the planned state at t), the forward simulation from the "
           "start follows the planned path: inverse against forward dynamics along a whole trajectory."),
    ("code", "def tau(t, q_, qd_):\n"
             "    return mb.inverse_dynamics(model, *minimum_jerk(t))\n"
             "sol = eqx.filter_jit(lambda m: mb.simulate(m, start, jnp.zeros(3), T, ts=ts, tau=tau, solver='dopri8', "
             "rtol=1e-12, atol=1e-12))(model)\n"
             "print('max |q_simulated - q_planned| =', float(jnp.max(jnp.abs(sol.q - q))), 'rad')\n"
             "plt.plot(ts, q, 'k:', lw=3); plt.plot(ts, sol.q); plt.xlabel('t (s)'); plt.ylabel('angle (rad)');"),
]

SHOULDER_SETUP = SETUP.replace('matplotlib.use("Agg")', "%matplotlib inline") + """
from jaxmb import studies
import time, warnings
matplotlib.rcParams["figure.dpi"] = 60  # small outputs
# MoBL-ARMS is not shipped with jaxmb: $JAXMB_MOBL_ARMS or the repository's sibling shared/models.
MODEL = os.environ.get("JAXMB_MOBL_ARMS", "../../shared/models/MOBL_ARMS_fixed_41.osim")"""

NOTEBOOKS["shoulder_study"] = [
    ("md", "# The shoulder study (Ehsani 2016, section 4-4 C, Figs. 19-21)\n\n"
           "MoBL-ARMS's shoulder: `q = (elv_angle, shoulder_elv, shoulder_rot)`, the clavicle and scapula "
           "following the elevation through the model's coupled coordinates (embedded joint functions), the "
           "elbow, forearm and wrist locked. The elevation tracks a smooth desired trajectory with the plane of "
           "elevation at 90 degrees and the axial rotation at -30 degrees, by computed-torque control "
           "(Eq. 200-201, K = diag(100, 100, 1000)). See `docs/how-to/shoulder-study.md`."),
    ("code", SHOULDER_SETUP),
    ("code", "with warnings.catch_warnings():\n    warnings.simplefilter('ignore')  # MoBL's impossible inertias\n"
             "    model = studies.shoulder_model(mb.io.read_osim(MODEL, muscles=False, locked=studies.locked_coordinates()).model)\n"
             "trajectory = studies.ElevationTrajectory()\n"
             "print(model.coordinate_names, '| massless bodies:', sum(b.massless for b in model.bodies), 'of', len(model.bodies))"),
    ("md", "## Tracking (Eq. 200-201) and Fig. 19\n\nStarted on the desired motion, the error of the exact "
           "computed-torque loop is zero in exact arithmetic; what remains is the integrator's. The dissertation "
           "reports the first and third coordinates to 16 significant figures and the elevation within 2e-4 rad."),
    ("code", "track = eqx.filter_jit(lambda m, tr: studies.track_shoulder(m, tr, rtol=1e-10, atol=1e-10))\n"
             "result = track(model, trajectory)\n"
             "err = np.abs(np.asarray(result.q - result.q_ref)).max(axis=0)\n"
             "print('max |q - q_des| (rad):', {k: float(e) for k, e in zip(studies.SHOULDER_COORDINATES, err)})\n"
             "print('integrator steps:', int(result.num_steps))\n"
             "assert err[0] < 1e-13 and err[2] < 1e-13 and err[1] < 2e-4\n"
             "studies.plot_elevation(result);"),
    ("md", "## The required torques (Fig. 20)"),
    ("code", "print('peak torques (N m):', {k: round(float(t), 3) for k, t in zip(studies.SHOULDER_COORDINATES, np.abs(np.asarray(result.tau)).max(axis=0))})\n"
             "studies.plot_torques(result);"),
    ("md", "## Embedded ODE against the DAE\n\nThe same tracking with the rhythm as eleven algebraic "
           "constraints on 14 joint variables (index 1). Ehsani reports the embedded route more than 3 times "
           "faster; `benchmarks/bench_closed_chains.py --sections shoulder` compares them at equal accuracy."),
    ("code", "track_dae = eqx.filter_jit(lambda m, tr: studies.track_shoulder_dae(m, tr, rtol=1e-10, atol=1e-10))\n"
             "dae = track_dae(model, trajectory)  # compiles\n"
             "def timed(f):\n    t = time.process_time(); jax.block_until_ready(f(model, trajectory)); return time.process_time() - t\n"
             "ode_s, dae_s = min(timed(track) for _ in range(3)), min(timed(track_dae) for _ in range(3))\n"
             "print(f'largest difference: q {float(jnp.abs(dae.q - result.q).max()):.1e} rad, tau {float(jnp.abs(dae.tau - result.tau).max()):.1e} N m; drift {float(dae.drift.max()):.1e} rad')\n"
             "print(f'steps: embedded {int(result.num_steps)}, DAE {int(dae.num_steps)}; CPU time DAE / embedded: {dae_s / ode_s:.1f}x')"),
    ("md", "## Muscle forces (Fig. 21)\n\nThe torques are shared among the 14 units of "
           "`studies.SHOULDER_MUSCLES` by static optimization with compliant tendons "
           "(`studies.compliant_static_optimization`: the sum of squared activations subject to "
           "`R F = tau` and the musculotendon equilibrium), through `studies.shoulder_muscle_forces`; "
           "`studies.plot_muscle_forces` draws Fig. 21."),
    ("code", "with warnings.catch_warnings():\n    warnings.simplefilter('ignore')  # MoBL's impossible inertias, skipped forces\n"
             "    muscled = studies.shoulder_model(mb.io.read_osim(MODEL, muscles=studies.SHOULDER_MUSCLES, "
             "locked=studies.locked_coordinates()).model)\n"
             "forces = studies.shoulder_muscle_forces(muscled, result, studies.compliant_static_optimization)\n"
             "print('peak forces (N):', {k: round(float(f)) for k, f in zip(studies.SHOULDER_MUSCLES, forces.max(axis=0))})\n"
             "assert np.isfinite(forces).all() and (forces >= 0).all()\n"
             "studies.plot_muscle_forces(result.ts, forces);"),
]


def main(names=None):
    for name, cells in NOTEBOOKS.items():
        if names and name not in names:
            continue
        nb = nbf.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.cells = [nbf.v4.new_markdown_cell(src) if kind == "md" else nbf.v4.new_code_cell(src)
                    for kind, src in cells]
        nbf.write(nb, HERE / f"{name}.ipynb")
        print("wrote", HERE / f"{name}.ipynb")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
