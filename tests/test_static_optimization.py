"""Static optimization (OpenSim's Static Optimization): the per-frame problem against scipy's
SLSQP, its implicit derivatives against finite differences, the actuator and setup files, and
arm26's tutorial motion against OpenSim 4.6."""

import os
import pathlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize

import jaxmb as mb
from jaxmb._static_optimization import _solve_frames
from jaxmb.cli import main
from jaxmb.io._setup import read_static_optimization_setup
from models_for_tests import arm26_tool_setup, muscled_elbow

DATA = pathlib.Path(__file__).parent / "data" / "opensim" / "motion"


# ---- the per-frame problem, against an independent solver ----


def _problem(seed, m=3, n=9):
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(m, n)) * rng.uniform(5.0, 50.0, size=n)
    lo = np.full(n, 0.01)
    hi = np.ones(n)
    lo[-1], hi[-1] = -np.inf, np.inf  # a reserve actuator
    lo[-2], hi[-2] = 0.0, 1.0  # a muscle whose activation may reach zero
    a = rng.uniform(0.0, 0.6, size=n)
    a[:2] = 1.0  # two muscles at full activation
    b = B @ np.clip(a, lo, hi)
    w = rng.uniform(0.5, 2.0, size=n)
    return B, b, w, lo, hi


def _slsqp(B, b, w, lo, hi, p, x0=None):
    """scipy's SLSQP from `x0` (default 0.5 clipped to the bounds), else from 10% into each
    finite range (0 for a free variable): its line search stops on some badly scaled frames
    from some starts ("Positive directional derivative", which starts depends on the scipy
    release), and with p > 1 and w > 0 the problem is strictly convex, so a start that
    succeeds gives the one solution."""
    finite = np.isfinite(lo) & np.isfinite(hi)
    lo_f, hi_f = np.where(finite, lo, 0.0), np.where(finite, hi, 0.0)  # no inf - inf below
    starts = [np.clip(np.full(B.shape[1], 0.5), lo, hi) if x0 is None else x0,
              np.where(finite, lo_f + 0.1 * (hi_f - lo_f), np.clip(0.0, lo, hi))]
    for start in starts:
        res = minimize(lambda x: np.sum(w * np.abs(x) ** p), start,
                       jac=lambda x: p * w * np.sign(x) * np.abs(x) ** (p - 1), method="SLSQP",
                       bounds=list(zip(np.where(np.isinf(lo), None, lo), np.where(np.isinf(hi), None, hi))),
                       constraints=[{"type": "eq", "fun": lambda x: B @ x - b, "jac": lambda x: B}],
                       options={"ftol": 1e-13, "maxiter": 1000})
        if res.success:
            return res.x
    raise AssertionError(f"SLSQP failed from every start: {res.message}")


_solve = jax.jit(_solve_frames, static_argnums=(5, 6, 7))


@pytest.mark.parametrize("p", [2.0, 3.0])
def test_frames_equal_scipy_slsqp(p):
    problems = [_problem(seed) for seed in range(4)]
    B, b, w, lo, hi = (np.stack(z) for z in zip(*problems))
    x, balance, kkt, steps, ok = _solve(jnp.asarray(B), jnp.asarray(b), jnp.asarray(w[0]), jnp.asarray(lo[0]),
                                        jnp.asarray(hi[0]), p, 1e-12, 50)
    assert bool(jnp.all(ok))
    assert float(jnp.max(balance)) < 1e-10 * np.max(np.abs(b))
    assert float(jnp.max(kkt)) < 1e-9
    for k in range(len(problems)):
        expected = _slsqp(B[k], b[k], w[0], lo[0], hi[0], p)
        np.testing.assert_allclose(np.asarray(x[k]), expected, rtol=0, atol=1e-6)
    # Muscles at their bounds: the test exercises the active set.
    assert np.any(np.isclose(np.asarray(x)[:, :-1], 0.01))
    assert p != 2.0 or np.any(np.isclose(np.asarray(x)[:, :-1], 1.0))


def test_infeasible_frame_is_reported():
    B, b, w, lo, hi = _problem(0)
    lo, hi = lo.copy(), hi.copy()
    lo[-1], hi[-1] = -1e-3, 1e-3  # the reserve can no longer make up what the muscles lack
    b = b + 1e4 * np.abs(B).max(axis=1)
    x, balance, kkt, steps, ok = _solve(jnp.asarray(B[None]), jnp.asarray(b[None]), jnp.asarray(w), jnp.asarray(lo),
                                        jnp.asarray(hi), 2.0, 1e-12, 50)
    assert not bool(ok[0]) and float(balance[0]) > 1.0 and bool(jnp.all(jnp.isfinite(x)))


def test_implicit_derivative_equals_finite_differences():
    B, b, w, lo, hi = _problem(2)
    c = np.random.default_rng(5).normal(size=B.shape[1])

    def loss(Bm, bv):
        x = _solve(Bm[None], bv[None], jnp.asarray(w), jnp.asarray(lo), jnp.asarray(hi), 2.0, 1e-12, 50)[0][0]
        return jnp.dot(x, jnp.asarray(c)) + 0.5 * jnp.sum(x ** 2)

    B, b = jnp.asarray(B), jnp.asarray(b)
    gB, gb = jax.grad(loss, argnums=(0, 1))(B, b)
    assert bool(jnp.all(jnp.isfinite(gB))) and bool(jnp.all(jnp.isfinite(gb)))
    rng = np.random.default_rng(6)
    dB, db = jnp.asarray(rng.normal(size=B.shape)), jnp.asarray(rng.normal(size=b.shape))
    h = 1e-6
    fd = (loss(B + h * dB, b + h * db) - loss(B - h * dB, b - h * db)) / (2 * h)
    assert abs(float(jnp.sum(gB * dB) + jnp.sum(gb * db)) - float(fd)) < 1e-6 * max(1.0, abs(float(fd)))


# ---- files ----


def test_actuator_file_naming_a_missing_coordinate(tmp_path):
    model = mb.load_osim(DATA / "arm26.osim")
    path = tmp_path / "reserves.xml"
    path.write_text("""<?xml version="1.0" encoding="UTF-8"?>
<OpenSimDocument Version="40000">
  <ForceSet name="reserves">
    <objects>
      <CoordinateActuator name="elbow_reserve">
        <coordinate>r_elbow_flx</coordinate>
        <optimal_force>10</optimal_force>
      </CoordinateActuator>
    </objects>
  </ForceSet>
</OpenSimDocument>
""")
    with pytest.raises(mb.ModelError, match=r"<CoordinateActuator name='elbow_reserve'> at .*reserves\.xml:5: "
                                            r"coordinate 'r_elbow_flx' is not a coordinate of the model"):
        mb.io.read_actuators(path, model)
    path.write_text(path.read_text().replace("r_elbow_flx", "r_elbow_flex"))
    (reserve,) = mb.io.read_actuators(path, model)
    assert isinstance(reserve, mb.CoordinateActuator) and float(reserve.optimal_force) == 10.0


_ACTUATOR_FILE = """<?xml version="1.0" encoding="UTF-8"?>
<OpenSimDocument Version="40000">
  <ForceSet name="reserves">
    <defaults>
      <CoordinateActuator name="default">
        <optimal_force>1000</optimal_force>
        <max_control>2</max_control>
      </CoordinateActuator>
    </defaults>
    <objects>
      <CoordinateActuator name="elbow_reserve">
        <coordinate>r_elbow_flex</coordinate>
        {line}
      </CoordinateActuator>
    </objects>
  </ForceSet>
</OpenSimDocument>
"""


@pytest.mark.parametrize("line, message", [
    # before: ignored, so the optimal force stayed OpenSim's default of 1 (a reserve 10x too strong)
    ("<optimal_forces>10</optimal_forces>", r"<optimal_forces> .*reserves\.xml:13: not supported .*check its spelling"),
    ("<min_control>nan</min_control>", r"reserves\.xml:13: <min_control> must be a number or Inf/-Inf, got NaN"),
])
def test_actuator_file_refuses_what_it_would_misread(tmp_path, line, message):
    path = tmp_path / "reserves.xml"
    path.write_text(_ACTUATOR_FILE.format(line=line))
    with pytest.raises(mb.ModelError, match=message):
        mb.io.read_actuators(path, mb.load_osim(DATA / "arm26.osim"))


def test_actuator_file_defaults_fill_what_an_actuator_leaves_out(tmp_path):
    """OpenSim 4.6 (ForceSet('reserves.xml')) gives this reserve the template's optimal force
    of 1000 (before: jaxmb ignored <defaults>, so 1)."""
    path = tmp_path / "reserves.xml"
    path.write_text(_ACTUATOR_FILE.format(line="<max_control>3</max_control>"))
    (reserve,) = mb.io.read_actuators(path, mb.load_osim(DATA / "arm26.osim"))
    assert float(reserve.optimal_force) == 1000.0 and float(reserve.max_control) == 3.0


def test_actuator_file_refuses_a_torque_between_a_body_and_itself(tmp_path):
    path = tmp_path / "reserves.xml"
    path.write_text(_ACTUATOR_FILE.replace("<defaults>", "<!--").replace("</defaults>", "-->").format(
        line="").replace('<CoordinateActuator name="elbow_reserve">', '<TorqueActuator name="t">').replace(
        "<coordinate>r_elbow_flex</coordinate>", "<bodyA>r_humerus</bodyA><bodyB>r_humerus</bodyB>").replace(
        "</CoordinateActuator>\n    </objects>", "</TorqueActuator>\n    </objects>"))
    with pytest.raises(mb.ModelError, match=r"between a body and itself \(bodyA = bodyB\)"):
        mb.io.read_actuators(path, mb.load_osim(DATA / "arm26.osim"))


def test_actuator_file_reads_gait2392_residuals():
    model = mb.load_osim(DATA / "subject01_simbody.osim")
    acts = mb.io.read_actuators(DATA / "gait2392_SO_Residual_Actuators.xml", model)
    assert [a.name for a in acts] == ["FX", "FY", "FZ", "MX", "MY", "MZ"]
    assert [type(a).__name__ for a in acts] == ["PointActuator"] * 3 + ["TorqueActuator"] * 3
    assert float(acts[1].optimal_force) == 200.0 and float(acts[1].min_control) == -1.0


@pytest.mark.parametrize("old, new, message", [
    ("<step_interval>1</step_interval>", "<step_interval>10</step_interval>",
     "setup.xml:18: step_interval 10: jaxmb solves every frame"),
    # before: a misspelled tag was ignored and its default used (the whole motion, no filter, exponent 2)
    ("<final_time>1</final_time>", "<finaltime>0.5</finaltime>",
     "<finaltime> of <AnalyzeTool name='arm26'> at"),
    ("<activation_exponent>2</activation_exponent>", "<activation_exponant>3</activation_exponant>",
     "setup.xml:21: not supported by jaxmb's OpenSim importer in <StaticOptimization>"),
    # before: ignored (speeds from the coordinates; the second analysis never ran)
    ("<speeds_file></speeds_file>", "<speeds_file>speeds.sto</speeds_file>",
     "setup.xml:36: jaxmb reads coordinates, not speeds"),
    ("</StaticOptimization>", "</StaticOptimization><StaticOptimization name=\"SO2\"><on>true</on>"
     "</StaticOptimization>", "a second StaticOptimization switched on"),
])
def test_setup_settings_jaxmb_would_not_follow_are_refused(tmp_path, capsys, old, new, message):
    setup = arm26_tool_setup(tmp_path, "arm26_Setup_StaticOptimization.xml", old, new)
    assert main(["static-optimization", "--setup", str(setup), "--out", str(tmp_path / "o")]) == 1
    assert message in capsys.readouterr().err


def test_setup_input_directory_is_where_its_files_are(tmp_path):
    """OpenSim's <input_directory>: before, the static optimization setup ignored it (the
    inverse dynamics setup did not)."""
    (tmp_path / "in").mkdir()
    arm26_tool_setup(tmp_path / "in", "arm26_Setup_StaticOptimization.xml", "<results_directory>",
                     "<input_directory>in</input_directory><results_directory>").rename(tmp_path / "setup.xml")
    setup = read_static_optimization_setup(tmp_path / "setup.xml")
    assert setup.model_file == str(tmp_path / "in" / "arm26.osim")


# ---- against OpenSim 4.6's Static Optimization ----


# arm26's wrapped muscles compile for minutes (vmapped wrap iterations): these tests are slow.
@pytest.fixture(scope="module")
def arm26_command(tmp_path_factory):
    out = tmp_path_factory.mktemp("so")
    assert main(["static-optimization", "--setup", str(DATA / "arm26_Setup_StaticOptimization.xml"),
                 "--out", str(out), "--compile-cache", "none"]) == 0
    return out


@pytest.mark.slow
def test_arm26_activations_equal_opensims(arm26_command):
    written = mb.io.read_storage(arm26_command / "arm26_StaticOptimization_activation.sto")
    ref = mb.io.read_storage(DATA / "arm26_StaticOptimization_activation.sto")
    assert written.labels == ref.labels == ("TRIlong", "TRIlat", "TRImed", "BIClong", "BICshort", "BRA")
    np.testing.assert_allclose(written.time, ref.time, rtol=0, atol=1e-10)
    # Interior frames within 0.01 (the figure); OpenSim's interior-point solve (IPOPT,
    # tolerance 1e-4) stops short of the bounds where jaxmb's active set reaches them.
    np.testing.assert_allclose(written.values[5:-5], ref.values[5:-5], rtol=0, atol=0.01)
    assert np.max(np.abs(written.values - ref.values)) < 0.005


@pytest.mark.slow
def test_arm26_balances_the_torques(arm26_command):
    model = mb.load_osim(DATA / "arm26.osim")
    motion = mb.io.read_storage(DATA / "arm26_InverseKinematics.mot")
    q = mb.io.coordinates_from_motion(model, motion)
    result = mb.static_optimization(model, motion.time, q, lowpass_hz=6.0, time_range=(0.0, 1.0))
    assert bool(jnp.all(result.result == mb.RESULTS.successful))
    assert float(jnp.max(result.torque_residual)) < 1e-8
    assert float(jnp.max(result.kkt_residual)) < 1e-10
    written = mb.io.read_storage(arm26_command / "arm26_StaticOptimization_force.sto")
    np.testing.assert_allclose(written.values, np.asarray(result.muscle_forces), rtol=1e-12, atol=1e-9)
    assert float(jnp.min(result.activations)) >= 0.01 - 1e-15  # Thelen's minimum activation


def test_arm26_along_the_frozen_paths_is_opensims_problem():
    """With OpenSim's wrap iterates and the muscles pulling along their frozen paths (as
    OpenSim applies a path's tension), OpenSim 4.6's own activations meet jaxmb's torque
    balance to round-off: the constraint is OpenSim's. With ``R = -dL/dq`` they leave
    0.037 N m at the shoulder (docs/opensim-parity.md)."""
    model = mb.load_osim(DATA / "arm26.osim", wrap_geometry="opensim")
    motion = mb.io.read_storage(DATA / "arm26_InverseKinematics.mot")
    q = mb.io.coordinates_from_motion(model, motion)
    ref = mb.io.read_storage(DATA / "arm26_StaticOptimization_activation.sto")
    so = mb.static_optimization(model, motion.time, q, lowpass_hz=6.0, time_range=(0.0, 1.0),
                                moment_arms="frozen_path")
    assert bool(jnp.all(so.result == mb.RESULTS.successful)) and float(jnp.max(so.torque_residual)) < 1e-10
    opensims = jnp.einsum("kqn,kn->kq", so.constraint_matrix, jnp.asarray(ref.values)) - so.constraint_target
    assert float(jnp.max(jnp.abs(opensims))) < 1e-9  # N m, against a 2.8 N m shoulder moment
    # Same constraint, so the activations differ only by OpenSim's interior-point stop.
    assert float(jnp.max(jnp.abs(so.activations - ref.values))) < 0.005
    assert float(jnp.median(jnp.abs(so.activations - ref.values))) < 2e-4


def test_unknown_moment_arm_route_is_refused():
    with pytest.raises(ValueError, match="moment_arms must be 'closed_form' or 'frozen_path'"):
        mb.static_optimization(_elbow(), np.linspace(0.0, 1.0, 5), jnp.ones((5, 1)), moment_arms="numeric")


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("JAXMB_SLOW"), reason="gait2392 compiles for minutes; set JAXMB_SLOW=1")
def test_gait2392_with_ground_reactions_and_residuals_equals_opensim(tmp_path):
    assert main(["static-optimization", "--setup", str(DATA / "subject01_Setup_StaticOptimization.xml"),
                 "--out", str(tmp_path), "--compile-cache", "none"]) == 0
    written = mb.io.read_storage(tmp_path / "subject01_walk1_StaticOptimization_activation.sto")
    ref = mb.io.read_storage(DATA / "subject01_walk1_StaticOptimization_activation.sto")
    assert written.labels == ref.labels
    np.testing.assert_allclose(written.time, ref.time, rtol=0, atol=1e-10)
    np.testing.assert_allclose(written.values[3:-3], ref.values[3:-3], rtol=0, atol=0.01)


# ---- a small model end to end: derivatives through the whole pipeline ----


def _elbow():
    return muscled_elbow([(name, side, mb.DeGrooteFregly2016Muscle(fmax, 0.12, 0.12, 0.1, 10.0, compliant_tendon=False))
                          for name, side, fmax in (("flexor", "flexor", 300.0), ("flexor2", "flexor", 150.0),
                                                   ("extensor", "extensor", 400.0))])


def test_gradient_through_the_pipeline_equals_finite_differences():
    model = _elbow()
    time = np.linspace(0.0, 1.0, 41)
    q = jnp.asarray(1.0 + 0.8 * np.sin(2 * np.pi * time))[:, None]

    def loss(fmax, qq):
        m = eqx.tree_at(lambda x: x.muscles[0].force_model.max_isometric_force, model, fmax)
        so = mb.static_optimization(m, time, qq, actuators_extra=[mb.CoordinateActuator("reserve", "flex")])
        return jnp.sum(so.activations ** 2) + 1e-3 * jnp.sum(so.controls ** 2), so

    fmax = jnp.asarray(300.0)
    (value, so), (g_f, g_q) = jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))(fmax, q)
    value_only = jax.jit(lambda f, qq: loss(f, qq)[0])
    assert bool(jnp.all(so.result == mb.RESULTS.successful)) and float(jnp.max(so.torque_residual)) < 1e-8
    # Some frames have a muscle at zero activation (its lower bound): the derivative is
    # still finite there.
    assert float(jnp.min(so.activations)) == 0.0
    assert bool(jnp.isfinite(g_f)) and bool(jnp.all(jnp.isfinite(g_q)))
    h = 1e-3
    fd = (value_only(fmax + h, q) - value_only(fmax - h, q)) / (2 * h)
    assert abs(float(g_f) - float(fd)) < 1e-6 * max(abs(float(fd)), 1e-6)
    dq = jnp.asarray(np.random.default_rng(3).normal(size=q.shape)) * 1e-2
    fd_q = (value_only(fmax, q + 1e-4 * dq) - value_only(fmax, q - 1e-4 * dq)) / 2e-4
    assert abs(float(jnp.sum(g_q * dq)) - float(fd_q)) < 1e-5 * abs(float(fd_q))


_TWO_LINK = (pathlib.Path(__file__).parent / "data" / "broken_osim" / "path_point_nan_location.osim").read_text(
).replace("nan 0.1 0", "0.1 0.1 0")


def test_command_writes_activations_and_forces(tmp_path, capsys):
    (tmp_path / "two_link.osim").write_text(_TWO_LINK)
    time = np.linspace(0.0, 1.0, 51)
    values = np.column_stack([20.0 * np.sin(2 * np.pi * time), 30.0 + 10.0 * np.cos(2 * np.pi * time)])
    mb.io.write_storage(tmp_path / "motion.mot", mb.io.MotionData(time, ("q1", "q2"), values, in_degrees=True))
    (tmp_path / "reserves.xml").write_text("""<OpenSimDocument Version="40000"><ForceSet name="r"><defaults/><objects>
  <CoordinateActuator name="q1_reserve"><coordinate>q1</coordinate><optimal_force>10</optimal_force></CoordinateActuator>
  <CoordinateActuator name="q2_reserve"><coordinate>q2</coordinate><optimal_force>5</optimal_force>
    <min_control>-infinity</min_control><max_control>infinity</max_control></CoordinateActuator>
</objects></ForceSet></OpenSimDocument>""")
    out = tmp_path / "so"
    assert main(["static-optimization", str(tmp_path / "two_link.osim"), str(tmp_path / "motion.mot"), "--out",
                 str(out), "--lowpass", "6", "--actuators", str(tmp_path / "reserves.xml"),
                 "--compile-cache", "none"]) == 0
    assert "51 frames, 1 muscles, 2 actuators, low-pass 6 Hz" in capsys.readouterr().out
    act = mb.io.read_storage(out / "two_link_StaticOptimization_activation.sto")
    force = mb.io.read_storage(out / "two_link_StaticOptimization_force.sto")
    assert act.labels == force.labels == ("flexor", "q1_reserve", "q2_reserve")
    # The same solve through the Python API (OpenSim's setup: reserves after the model's actuators).
    model = mb.load_osim(tmp_path / "two_link.osim")
    reserves = mb.io.read_actuators(tmp_path / "reserves.xml", model)
    so = mb.static_optimization(model, time, jnp.deg2rad(jnp.asarray(values)), lowpass_hz=6.0,
                                actuators_extra=reserves)
    np.testing.assert_allclose(act.values, np.hstack([so.activations, so.controls]), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(force.values[:, 1:], force.values[:, 1:] * 0 + act.values[:, 1:] * [10.0, 5.0],
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(force.values[:, 0], np.asarray(so.muscle_forces[:, 0]), rtol=1e-12)
    assert float(jnp.max(so.torque_residual)) < 1e-10
