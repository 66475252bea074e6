"""The README's and the documentation's code runs as printed, and what its comments claim holds.

Each page's ```python blocks run in order in one namespace, as a reader would paste them.
"""

import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb

from pages import ROOT, in_folder_with, run_page

QUICK_START = (
    "python3 -m venv .venv && .venv/bin/pip install -e . && "
    ".venv/bin/jaxmb simulate double-pendulum --t1 20 --out results",
    'python3 -m venv .venv && .venv/bin/pip install -e ".[test]" && .venv/bin/python -m pytest',
)


@pytest.fixture(scope="module")
def readme():
    return run_page("README.md")


@pytest.fixture(scope="module")
def getting_started():
    return run_page("docs/getting-started.md", min_blocks=3)


@pytest.fixture(scope="module")
def closed_chains():
    return run_page("docs/how-to/closed-chains.md", min_blocks=2)


def test_quick_start_commands_are_in_the_readme_and_the_getting_started_page():
    """CI and fresh-machine checks run these two lines: they stay byte-identical."""
    for page in ("README.md", "docs/getting-started.md"):
        text = (ROOT / page).read_text()
        for command in QUICK_START:
            assert f"```bash\n{command}\n```" in text, (page, command)


def test_readme_example_gives_the_documented_shapes(readme):
    assert readme["M"].shape == (2, 2) and readme["qdd"].shape == (2,)
    assert jnp.allclose(readme["M"], readme["M"].T, rtol=0, atol=1e-15)
    assert readme["sol"].q.shape == (501, 2) and bool(readme["sol"].success)


def test_getting_started_builds_the_leg(getting_started):
    assert getting_started["M"].shape == (2, 2) and getting_started["qdd"].shape == (2,)
    leg = getting_started["leg"]
    assert leg.nq == 1 and leg.coordinate_names == ("knee_flexion",)


def test_slider_crank_swing_keeps_the_loop_closed_and_conserves_energy(closed_chains):
    assert closed_chains["sol"].q.shape == (201, 1)
    assert float(closed_chains["gap"].max()) < 1e-10
    energy = closed_chains["energy"]
    assert float(jnp.ptp(energy)) < 1e-7 * float(jnp.abs(energy).max())
    q = closed_chains["sol"].q[:, 0]
    # A swing, not a turn: the continuation from q_ref is good over this range.
    assert -4.0 < float(q.min()) < -3.0 and float(q.max()) == pytest.approx(0.5)


def test_slider_crank_premodeled_turns_keep_the_loop_closed(closed_chains):
    mb, fast, spin = closed_chains["mb"], closed_chains["fast"], closed_chains["spin"]
    assert float(closed_chains["fit_error"].max()) < 1e-12
    q = spin.q[-1]
    assert float(q[0]) > 4 * jnp.pi   # more than two turns
    f = mb.joint_values(fast, q)
    assert float(jnp.abs(closed_chains["slider_crank"](f[1:], q, jnp.array([0.1, 0.3]))).max()) < 1e-12
    energy = lambda q, qd: mb.kinetic_energy(fast, q, qd) + mb.potential_energy(fast, q)  # noqa: E731
    e0 = energy(jnp.array([0.5]), jnp.array([20.0]))
    assert float(jnp.abs(energy(spin.q[-1], spin.qd[-1]) - e0)) < 1e-7 * float(e0)


def test_controller_examples_hold_the_elbow_and_track_the_reference():
    page = run_page("docs/how-to/controllers.md", min_blocks=2)
    assert abs(float(page["sol"].q[-1, 1]) - float(jnp.pi) / 3) < 2e-2
    assert float(jnp.abs(page["tracked"].q[-1] - page["reference"](2.0)[0]).max()) < 1e-3
    activation = page["muscled"].state.controller
    assert abs(float(activation[-1, 0]) - 0.5) < 1e-3 and float(activation[0, 0]) == 0.05


def test_batch_examples_run_and_float32_stays_float32():
    page = run_page("docs/how-to/batches.md", min_blocks=3)
    q_end, success = page["final_states"](page["q0s"])
    assert q_end.shape == (64, 2) and bool(success.all())
    # The same per-member steps, mapped in chunks: equal to round-off (bit for bit on a CPU).
    np.testing.assert_allclose(page["chunked"](page["q0s"]), q_end, rtol=1e-12, atol=1e-12)
    assert page["qdd"].dtype == jnp.float32
    # The batch split over the CPU devices (here one): the unsplit batch's values.
    gait, qs = page["gait"], page["qs"]
    lengths, arms = jax.jit(jax.vmap(lambda q: mb.muscle_lengths_and_moment_arms(gait, q)))(np.asarray(qs))
    np.testing.assert_allclose(page["lengths"], lengths, rtol=1e-14, atol=0)
    np.testing.assert_allclose(page["arms"], arms, rtol=1e-13, atol=1e-16)
    assert page["lengths"].shape == (256, 54) and page["arms"].shape == (256, 23, 54)
    # Why the page turns shard_map's check of varying axes off: jaxmb's argument checks.
    checked = jax.jit(jax.shard_map(jax.vmap(lambda q: mb.muscle_lengths(gait, q)), mesh=page["cores"],
                                    in_specs=page["P"]("states"), out_specs=page["P"]("states")))
    with pytest.raises(TypeError, match="cond branches must have equal output types"):
        checked(qs)


_SPLIT = '''
import json, sys
import jax
jax.config.update("jax_num_cpu_devices", 2)
import numpy as np
sys.path.insert(0, "tests")
from pages import block_index, run_page
first = run_page("docs/how-to/batches.md", upto=1)  # its imports, float64
block = block_index("docs/how-to/batches.md", "shard_map")
page = run_page("docs/how-to/batches.md", start=block, upto=block + 1, namespace=first)
mb, gait, qs = page["mb"], page["gait"], page["qs"]
lengths, arms = jax.jit(jax.vmap(lambda q: mb.muscle_lengths_and_moment_arms(gait, q)))(np.asarray(qs))
print(json.dumps({"devices": len(page["lengths"].sharding.device_set),
                  "lengths": float(abs(page["lengths"] - lengths).max()), "arms": float(abs(page["arms"] - arms).max()),
                  "dtype": str(page["arms"].dtype)}))
'''


def test_batch_split_over_two_cpu_devices_gives_the_unsplit_values():
    """The page's `shard_map` over two CPU devices (a fresh process: the device count is
    fixed when JAX starts) puts half the states on each and returns the one-device values."""
    import json
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _SPLIT], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"}, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["devices"] == 2 and out["dtype"] == "float64"
    assert out["lengths"] <= 1e-15 and out["arms"] <= 1e-15, out


def test_identification_page_recovers_the_masses_that_made_its_motion():
    """The page's claim: Levenberg-Marquardt finds the double pendulum's masses (0.8, 1.3) to
    round-off in about 10 iterations, and the fitted model is the guess with only those leaves
    changed."""
    page = run_page("docs/how-to/identification.md")
    fit, guess, masses, mb = page["fit"], page["guess"], page["masses"], page["mb"]
    assert fit.result == mb.RESULTS.successful and bool(page["fit"].result == mb.RESULTS.successful)
    np.testing.assert_allclose(jnp.stack(fit.parameters), (0.8, 1.3), rtol=1e-9)
    np.testing.assert_allclose(jnp.stack(masses(fit.model)), (0.8, 1.3), rtol=1e-9)
    assert float(fit.loss) < 1e-20 and 5 <= int(fit.steps) <= 15
    rest = eqx.tree_at(masses, fit.model, masses(guess))
    assert jax.tree.all(jax.tree.map(lambda a, b: bool(jnp.all(a == b)), eqx.filter(rest, eqx.is_array),
                                     eqx.filter(guess, eqx.is_array)))


def test_sharp_bits_page_results_are_what_its_comments_say():
    """A simulation out of steps stops with its result code and its last accepted state; a
    loop closure out of reach reports ``loop_not_converged`` instead of a number."""
    page = run_page("docs/sharp-bits.md", min_blocks=2)
    mb, sol = page["mb"], page["sol"]
    assert sol.result == mb.RESULTS.max_steps_reached and not bool(sol.success)
    assert mb.RESULTS[sol.result].startswith("the integrator reached max_steps before t1")
    assert 0.0 < float(sol.t_end) < 10.0 and bool(jnp.all(jnp.isfinite(sol.state_end.q)))
    loop = page["loop"]
    assert loop.solve(jnp.array([9.0]), throw=False).result == mb.RESULTS.loop_not_converged
    assert loop.solve(jnp.array([0.0]), throw=False).result == mb.RESULTS.successful


# ---- the how-to pages that read a user's files, run beside the files they name ----

MOTION = ROOT / "tests" / "data" / "opensim" / "motion"


def test_fast_muscle_paths_page_fits_within_its_tolerances_and_writes_opensims_path_set(tmp_path, monkeypatch):
    """The page's fit: lengths within 6 µm RMS, moment arms within 0.13 mm (the cylinder
    wrap's engagement is a kink the polynomial rounds: OpenSim's default 0.1 mm is not met
    at order 6, measured 0.10 and 0.13 mm); the fitted model agrees with the geometric one
    between the samples; fitted around arm26's motion, within 0.1 mm of it at a frame; and
    the path set it writes names both muscles (run beside links to the package's data and
    the motion, as from the repository root)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jaxmb").mkdir()
    (tmp_path / "jaxmb" / "data").symlink_to(ROOT / "jaxmb" / "data")
    (tmp_path / "tests" / "data" / "opensim").mkdir(parents=True)
    (tmp_path / "tests" / "data" / "opensim" / "motion").symlink_to(MOTION)
    page = run_page("docs/how-to/fast-muscle-paths.md", min_blocks=3)
    fit = page["fit"]
    assert fit.model.muscle_names == ("TRIlat", "BRA") and all(m.path is not None for m in fit.model.muscles)
    assert np.all(fit.length_rms <= 1e-5) and np.all(fit.moment_arm_rms <= 2e-4) and fit.orders == (6, 6)
    assert float(np.abs(page["L"] - page["L0"]).max()) < 1e-3
    assert page["around"].shape == (31 * 11, 2)
    assert float(np.abs(page["at_frame"] - page["mb"].muscle_lengths(page["model"], page["frames"][7])).max()) < 1e-4
    written = (tmp_path / "arm26_FunctionBasedPathSet.xml").read_text()
    assert '<FunctionBasedPath name="/forceset/TRIlat">' in written and "/jointset/r_elbow/r_elbow_flex" in written


def test_import_opensim_page_drives_the_force_set_as_its_comments_say():
    """arm26 imports with its six muscles; on the forces model, forward dynamics adds the
    passive elements (``Q(u = None)``), and the force set's ``Q(u)`` is the passive part plus
    the actuators' ``actuator_forces(u)``."""
    page = run_page("docs/how-to/import-opensim.md", min_blocks=2)   # paths from the repository root
    mb, model, forced = page["mb"], page["model"], page["forced"]
    assert page["L"].shape == (6,) and page["R"].shape == (model.nq, 6) == (2, 6)
    q, qd, u = page["q"], page["qd"], page["u"]
    assert len(mb.actuator_names(forced)) == u.shape[0] == 4
    passive = mb.force_set_forces(forced, q, qd)
    assert float(jnp.abs(passive).max()) > 1e-2   # the springs, bushing and limits act at this state
    balance = mb.mass_matrix(forced, q) @ page["qdd"] + mb.bias_forces(forced, q, qd) - passive
    assert float(jnp.abs(balance).max()) < 1e-10 * float(jnp.abs(passive).max())
    np.testing.assert_allclose(page["Q"], passive + mb.actuator_forces(forced, q, qd, u), rtol=1e-13, atol=1e-13)
    assert float(jnp.abs(mb.actuator_forces(forced, q, qd, u)).max()) > 1e-2   # the controls act
    assert bool(page["sol"].success) and bool(jnp.all(jnp.isfinite(page["sol"].q)))


def test_motion_files_page_gives_opensims_inverse_dynamics_of_arm26(tmp_path, monkeypatch):
    """The written table reads back to the bit; the inverse dynamics is OpenSim 4.6's file
    (8 decimals) for arm26's tutorial motion at 6 Hz."""
    in_folder_with(monkeypatch, tmp_path, [MOTION / "arm26.osim", MOTION / "arm26_InverseKinematics.mot"])
    page = run_page("docs/how-to/motion-files.md", min_blocks=4, upto=3)
    mb, model, result = page["mb"], page["model"], page["result"]
    written = mb.io.read_storage("out.sto")
    assert written.labels == model.coordinate_names and np.array_equal(written.values, np.asarray(page["q"]))
    ref = mb.io.read_storage(MOTION / "arm26_id_lowpass6.sto")
    assert ref.labels == tuple(f"{c}_moment" for c in model.coordinate_names)
    np.testing.assert_allclose(np.asarray(result.time), ref.time, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(result.forces), ref.values, rtol=0, atol=1e-8)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("JAXMB_SLOW"), reason="gait2392 compiles for minutes; set JAXMB_SLOW=1")
def test_static_optimization_page_shares_the_walk_as_opensim_does(tmp_path, monkeypatch):
    """Block 1 is OpenSim 4.6's Static Optimization of gait2392's walk (interior frames within
    0.01, as `tests/test_static_optimization.py` holds the command); the compliant tendons
    and the frozen paths on arm26 balance the torques."""
    in_folder_with(monkeypatch, tmp_path, [MOTION / name for name in (
        "arm26.osim", "arm26_InverseKinematics.mot", "subject01_simbody.osim", "subject01_walk1_ik.mot",
        "subject01_walk1_grf.xml", "subject01_walk1_grf.mot", "gait2392_SO_Residual_Actuators.xml")])
    page = run_page("docs/how-to/static-optimization.md", min_blocks=3, upto=1)
    mb, so = page["mb"], page["so"]
    assert so.activations.shape[1] == 92 and so.controls.shape[1] == 6 and bool(page["ok"].all())
    ref = mb.io.read_storage(MOTION / "subject01_walk1_StaticOptimization_activation.sto")
    np.testing.assert_allclose(np.asarray(so.activations)[3:-3], ref.values[3:-3, :92], rtol=0, atol=0.01)

    run_page("docs/how-to/static-optimization.md", start=1, upto=2, namespace=page)
    so, arm = page["so"], page["arm"]
    assert bool(jnp.all(so.result == mb.RESULTS.successful))
    R = jax.vmap(lambda x: mb.moment_arms(arm, x))(so.q)
    # One reserve per coordinate, in coordinate order: their forces are generalized forces.
    balance = jnp.einsum("kqn,kn->kq", R, so.muscle_forces) + so.actuator_forces - so.generalized_forces
    assert float(jnp.abs(balance).max()) < 1e-8

    run_page("docs/how-to/static-optimization.md", start=2, namespace=page)
    so = page["so"]
    assert bool(jnp.all(so.result == mb.RESULTS.successful)) and float(jnp.max(so.torque_residual)) < 1e-10
    ref = mb.io.read_storage(MOTION / "arm26_StaticOptimization_activation.sto")
    assert float(jnp.max(jnp.abs(so.activations - ref.values))) < 0.005


@pytest.mark.slow
def test_muscle_force_models_page_gives_the_muscles_torques(tmp_path, monkeypatch):
    """The concept page's torques are ``R F`` with ``R = -dL/dq`` (central differences of the
    lengths) and ``F`` half-active Thelen muscles at rest, each within their maximum force."""
    in_folder_with(monkeypatch, tmp_path, [MOTION / "arm26.osim"])
    page = run_page("docs/concepts/muscle-force-models.md")
    mb, model, q, F = page["mb"], page["model"], page["q"], page["F"]
    h = 1e-6
    minus_dl_dq = jnp.stack([(mb.muscle_lengths(model, q - h * e) - mb.muscle_lengths(model, q + h * e)) / (2 * h)
                             for e in jnp.eye(2)])
    np.testing.assert_allclose(page["tau"], minus_dl_dq @ F, rtol=1e-6)
    fmax = jnp.stack([m.force_model.max_isometric_force for m in model.muscles])
    assert bool(jnp.all(F > 0)) and bool(jnp.all(F < fmax)) and float(jnp.abs(page["V"]).max()) == 0.0


@pytest.mark.slow
def test_shoulder_study_page_tracks_the_elevation_and_shares_the_torques(tmp_path, monkeypatch, shared_dir):
    """The page's tracking holds the elevation (within 2e-4 rad, the dissertation's bound) and
    writes its three figures; the fourteen muscles' forces are finite and non-negative."""
    mobl = shared_dir / "models" / "MOBL_ARMS_fixed_41.osim"
    if not mobl.exists():
        pytest.skip(f"{mobl} is not available")
    in_folder_with(monkeypatch, tmp_path, [mobl])
    page = run_page("docs/how-to/shoulder-study.md", min_blocks=2)
    result, forces = page["result"], page["forces"]
    assert result.q.shape == result.tau.shape == (201, 3)
    assert float(jnp.abs(result.q - result.q_ref).max()) < 2e-4
    assert forces.shape == (201, 14) and bool(jnp.all(jnp.isfinite(forces))) and float(forces.min()) >= 0.0
    assert all((tmp_path / name).stat().st_size > 0 for name in ("fig19.png", "fig20.png", "fig21.png"))
