"""Static optimization's options: per-muscle control bounds read from the .osim, the optax
route against the dual Newton route and SLSQP, and acceleration vs moment matching."""

import json
import pathlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb
from jaxmb.cli import main

_TWO_LINK = (pathlib.Path(__file__).parent / "data" / "broken_osim" / "path_point_nan_location.osim").read_text(
).replace("nan 0.1 0", "0.1 0.1 0")
_FLEXOR = '<Thelen2003Muscle name="flexor">'
_TIME = np.linspace(0.0, 1.0, 21)
_Q = np.column_stack([0.6 * np.sin(2 * np.pi * _TIME), 0.5 + 0.3 * np.cos(2 * np.pi * _TIME)])


def _two_link(tmp_path, controls=""):
    path = tmp_path / "two_link.osim"
    path.write_text(_TWO_LINK.replace(_FLEXOR, _FLEXOR + controls))
    return mb.load_osim(path)


def _reserves():
    return [mb.CoordinateActuator("q1_reserve", "q1", optimal_force=2.0, min_control=-np.inf, max_control=np.inf),
            mb.CoordinateActuator("q2_reserve", "q2", optimal_force=50.0, min_control=-np.inf, max_control=np.inf)]


# ---- per-muscle min_control and max_control ----


def test_max_control_bounds_the_activation(tmp_path):
    free = mb.static_optimization(_two_link(tmp_path), _TIME, _Q, actuators_extra=_reserves())
    model = _two_link(tmp_path, "<min_control>0.02</min_control><max_control>0.5</max_control>")
    assert float(model.muscles[0].min_control) == 0.02 and float(model.muscles[0].max_control) == 0.5
    so = mb.static_optimization(model, _TIME, _Q, actuators_extra=_reserves())
    assert float(jnp.max(free.activations)) > 0.6 and float(jnp.min(free.activations)) == 0.01  # Thelen's default
    assert float(jnp.max(so.activations)) == 0.5 and float(jnp.min(so.activations)) == 0.02
    assert bool(jnp.all(so.result == mb.RESULTS.successful))
    assert float(jnp.max(so.torque_residual)) < 1e-10 and float(jnp.max(so.kkt_residual)) < 1e-10
    # Where the bound is active the reserve makes up the rest: the torque balance holds.
    tau = jnp.einsum("kqn,kn->kq", so.constraint_matrix, jnp.hstack([so.activations, so.controls]))
    np.testing.assert_allclose(np.asarray(tau), np.asarray(so.constraint_target), rtol=0, atol=1e-10)


def test_omitted_bounds_take_opensims_defaults(tmp_path):
    # OpenSim 4.6's getMinControl(): 0.01 for Thelen2003Muscle and Millard2012EquilibriumMuscle
    # whatever their minimum_activation (MoBL-ARMS's Millard muscles have 0), 0 for DeGroote-Fregly.
    millard = _TWO_LINK.replace("Thelen2003Muscle", "Millard2012EquilibriumMuscle").replace(
        "<max_isometric_force>", "<minimum_activation>0</minimum_activation><max_isometric_force>")
    degroote = _TWO_LINK.replace("Thelen2003Muscle", "DeGrooteFregly2016Muscle")
    for text, expected in ((_TWO_LINK, 0.01), (millard, 0.01), (degroote, 0.0)):
        (tmp_path / "m.osim").write_text(text)
        (m,) = mb.load_osim(tmp_path / "m.osim").muscles
        assert (float(m.min_control), float(m.max_control)) == (expected, 1.0)
    (tmp_path / "m.osim").write_text(_TWO_LINK.replace("<max_isometric_force>",
                                                       "<minimum_activation>0.05</minimum_activation><max_isometric_force>"))
    with pytest.raises(mb.ModelError, match=r"m\.osim:\d+: .*min_control 0\.01 is below the Thelen2003Muscle model's "
                                            r"minimum_activation 0\.05"):
        mb.load_osim(tmp_path / "m.osim")  # as OpenSim 4.6: give <min_control> at least minimum_activation


@pytest.mark.parametrize("controls, message", [
    ("<min_control>0.6</min_control><max_control>0.5</max_control>",
     r"Thelen2003Muscle name='flexor'> at .*two_link\.osim:\d+: .*min_control 0\.6 is above max_control 0\.5"),
    ("<max_control>nan</max_control>", r"two_link\.osim:\d+.*non-finite number \('nan'\)"),
    ("<min_control>0.001</min_control>",
     r"two_link\.osim:\d+: .*min_control 0\.001 is below the Thelen2003Muscle model's minimum_activation 0\.01"),
])
def test_bad_control_bounds_are_refused(tmp_path, controls, message):
    with pytest.raises(mb.ModelError, match=message):
        _two_link(tmp_path, controls)



def test_millard_min_control_floor_only_for_the_classic_model():
    points = [mb.PathPoint("ground", (0.0, 0.0, 0.0)), mb.PathPoint("ground", (0.3, 0.0, 0.0))]

    def muscle(damping, compliant):
        return mb.Muscle("m", points, min_control=0.0, force_model=mb.Millard2012EquilibriumMuscle(
            100.0, 0.1, 0.2, fiber_damping=damping, compliant_tendon=compliant))

    with pytest.raises(mb.ModelError, match=r"Muscle 'm': min_control 0\.0 is below the Millard2012EquilibriumMuscle "
                                            r"model's minimum_activation 0\.01"):
        muscle(0.0, True)
    assert float(muscle(0.1, True).min_control) == 0.0 and float(muscle(0.0, False).min_control) == 0.0
    assert float(mb.Muscle("d", points, force_model=mb.DeGrooteFregly2016Muscle(100.0, 0.1, 0.2)).min_control) == 0.0

# ---- the optax route (augmented Lagrangian around optax.sgd) against the dual Newton route ----

from scipy.optimize import minimize  # noqa: E402
from test_static_optimization import _problem, _slsqp, _solve  # noqa: E402

from jaxmb._static_optimization_matching import matching_problem  # noqa: E402
from jaxmb._static_optimization_optax import solve_frames_optax  # noqa: E402

_solve_optax = jax.jit(solve_frames_optax, static_argnums=(5, 6, 7))
_matching = eqx.filter_jit(matching_problem)
_mass_matrix = eqx.filter_jit(mb.mass_matrix)


def _frames(seeds):
    B, b, w, lo, hi = (np.stack(z) for z in zip(*[_problem(seed) for seed in seeds]))
    return jnp.asarray(B), jnp.asarray(b), jnp.asarray(w[0]), jnp.asarray(lo[0]), jnp.asarray(hi[0])


@pytest.mark.parametrize("p", [2.0, 3.0])
def test_optax_frames_equal_newton_and_slsqp(p):
    args = _frames(range(4))
    x, balance, kkt, steps, ok = _solve_optax(*args, p, 1e-12, 20000)
    assert bool(jnp.all(ok)) and float(jnp.max(balance)) < 1e-10 * float(jnp.max(jnp.abs(args[1])))
    assert float(jnp.max(kkt)) < 1e-10
    newton = _solve(*args, p, 1e-12, 50)[0]
    np.testing.assert_allclose(np.asarray(x), np.asarray(newton), rtol=0, atol=1e-9)
    for k in range(4):
        expected = _slsqp(*(np.asarray(a[k]) if a.ndim > 1 or i == 1 else np.asarray(a) for i, a in enumerate(args)),
                          p)
        np.testing.assert_allclose(np.asarray(x[k]), expected, rtol=0, atol=1e-6)


def test_optax_converges_on_gait2392_frames():
    """Four frames of gait2392's walk (tests/data/gait2392_so_frames.py), whose free variables'
    constraint rows are poorly conditioned: every frame within the default cap, on Newton's
    solution."""
    data = np.load(pathlib.Path(__file__).parent / "data" / "gait2392_so_frames.npz")
    B, b, lo, hi = (jnp.asarray(data[k]) for k in ("B", "b", "lo", "hi"))
    w = jnp.ones(B.shape[2])
    x, balance, kkt, steps, ok = _solve_optax(B, b, w, lo, hi, 2.0, 1e-11, 20000)
    assert bool(jnp.all(ok)) and int(jnp.max(steps)) < 5000
    assert float(jnp.max(balance)) < 1e-10 * float(jnp.max(jnp.abs(b))) and float(jnp.max(kkt)) < 1e-10
    np.testing.assert_allclose(np.asarray(x), np.asarray(_solve(B, b, w, lo, hi, 2.0, 1e-11, 100)[0]), rtol=0, atol=1e-9)


def test_both_routes_equal_slsqp_on_gait2392_frames_with_exponent_3():
    """Frames 9, 16 and 66 of gait2392's walk (tests/data/gait2392_so_frames.py) with ``p = 3``. On
    16 and 66 every variable of a row sits at a bound on the way to the solution, and the dual
    Newton route, its Newton matrix regularised for ``p = 2``'s curvature only, stalled there
    (result code ``static_optimization_failed``, activations up to 0.99 from the optax route's);
    on 9 its full steps across a reserve's ``s = 0`` (``x ∝ sign(s)√|s|``) cycled for 86 steps.
    Both routes now reach the KKT point SLSQP finds, Newton's in a few steps."""
    data = np.load(pathlib.Path(__file__).parent / "data" / "gait2392_so_frames_p3.npz")
    B, b, lo, hi = (jnp.asarray(data[k]) for k in ("B", "b", "lo", "hi"))
    w = jnp.ones(B.shape[2])
    newton = _solve(B, b, w, lo, hi, 3.0, 1e-11, 100)
    optax = _solve_optax(B, b, w, lo, hi, 3.0, 1e-11, 20000)
    for x, balance, kkt, steps, ok in (newton, optax):
        assert bool(jnp.all(ok)) and float(jnp.max(kkt)) < 1e-10
        assert float(jnp.max(balance)) < 1e-10 * float(jnp.max(jnp.abs(b)))
    assert int(jnp.max(newton[3])) < 30
    np.testing.assert_allclose(np.asarray(newton[0]), np.asarray(optax[0]), rtol=0, atol=1e-8)
    for k in range(B.shape[0]):
        # From the bounds' midpoints (reserves at 0): from 0.5 SLSQP stops on frame 9 with
        # "Positive directional derivative for linesearch".
        expected = _slsqp(*(np.asarray(a) for a in (B[k], b[k], w, lo, hi)), 3.0, x0=0.5 * np.asarray(lo + hi))
        np.testing.assert_allclose(np.asarray(newton[0][k]), expected, rtol=0, atol=1e-6)
        np.testing.assert_allclose(np.asarray(optax[0][k]), expected, rtol=0, atol=1e-6)


def test_optax_infeasible_frame_is_reported():
    B, b, w, lo, hi = _problem(0)
    lo[-1], hi[-1] = -1e-3, 1e-3
    b = b + 1e4 * np.abs(B).max(axis=1)
    x, balance, kkt, steps, ok = _solve_optax(*(jnp.asarray(a) for a in (B[None], b[None], w, lo, hi)), 2.0, 1e-12, 400)
    assert not bool(ok[0]) and int(steps[0]) >= 400 and float(balance[0]) > 1.0 and bool(jnp.all(jnp.isfinite(x)))


def test_optax_implicit_derivative_equals_newtons():
    B, b, w, lo, hi = _frames([2, 3])
    c = jnp.asarray(np.random.default_rng(5).normal(size=B.shape[2]))

    def loss(solve, steps, Bm, bv):
        x = solve(Bm, bv, w, lo, hi, 2.0, 1e-12, steps)[0]
        return jnp.sum(x @ c) + 0.5 * jnp.sum(x ** 2)

    g_optax = jax.grad(lambda Bm, bv: loss(_solve_optax, 20000, Bm, bv), argnums=(0, 1))(B, b)
    g_newton = jax.grad(lambda Bm, bv: loss(_solve, 50, Bm, bv), argnums=(0, 1))(B, b)
    for go, gn in zip(g_optax, g_newton):
        assert float(jnp.max(jnp.abs(gn))) > 1e-3
        np.testing.assert_allclose(np.asarray(go), np.asarray(gn), rtol=0, atol=1e-8 * float(jnp.max(jnp.abs(gn))))


_RESERVES = """<OpenSimDocument Version="40000"><ForceSet name="r"><objects>
  <CoordinateActuator name="q1_reserve"><coordinate>q1</coordinate><optimal_force>2</optimal_force>
    <min_control>-infinity</min_control><max_control>infinity</max_control></CoordinateActuator>
  <CoordinateActuator name="q2_reserve"><coordinate>q2</coordinate><optimal_force>50</optimal_force>
    <min_control>-infinity</min_control><max_control>infinity</max_control></CoordinateActuator>
</objects></ForceSet></OpenSimDocument>"""


def test_optax_command_equals_the_newton_route(tmp_path, capsys):
    model = _two_link(tmp_path, "<max_control>0.5</max_control>")
    (tmp_path / "reserves.xml").write_text(_RESERVES)
    mb.io.write_storage(tmp_path / "motion.mot", mb.io.MotionData(_TIME, ("q1", "q2"), _Q, in_degrees=False))
    args = ["static-optimization", str(tmp_path / "two_link.osim"), str(tmp_path / "motion.mot"), "--out",
            str(tmp_path / "so"), "--actuators", str(tmp_path / "reserves.xml"), "--compile-cache", "none"]
    assert main(args + ["--residual-weight", "-1"]) == 1
    assert "residual_weight must be None (constraint imposed) or a finite positive weight" in capsys.readouterr().err
    assert main(args + ["--solver", "optax"]) == 0
    written = mb.io.read_storage(tmp_path / "so" / "two_link_StaticOptimization_activation.sto")
    newton = mb.static_optimization(model, _TIME, _Q, actuators_extra=mb.io.read_actuators(tmp_path / "reserves.xml",
                                                                                            model))
    assert float(np.max(written.values[:, 0])) == 0.5
    np.testing.assert_allclose(written.values, np.hstack([newton.activations, newton.controls]), rtol=0, atol=1e-9)


def test_actuators_named_twice_or_time_are_refused(tmp_path):
    """A duplicate failed after the solve with a message about MotionData columns, and an
    actuator named 'time' wrote a file with two time columns."""
    model = _two_link(tmp_path)
    reserves = _reserves()
    with pytest.raises(ValueError, match=r"distinct names; \['q1_reserve'\] appear more than once"):
        mb.static_optimization(model, _TIME, _Q, actuators_extra=reserves + reserves[:1])
    named_time = mb.CoordinateActuator("time", "q1", optimal_force=2.0)
    with pytest.raises(ValueError, match="an actuator named 'time'"):
        mb.static_optimization(model, _TIME, _Q, actuators_extra=[named_time])


@pytest.mark.parametrize("kwargs, message", [
    (dict(solver="adam"), "solver must be 'newton' or 'optax', got 'adam'"),
    (dict(exponent=np.inf), r"exponent must be a finite number > 1 .* got inf"),  # gave NaN activations
    (dict(exponent=1.0), r"exponent must be a finite number > 1 .* got 1.0"),
    (dict(solver="optax", exponent=1.5), r"solver='optax' needs exponent >= 2 .* got 1\.5; use solver='newton'"),
    (dict(matching="forces"), r"matching must be one of \('moments', 'accelerations'\), got 'forces'"),
    (dict(residual_weight=-1.0), "residual_weight must be None .* or a finite positive weight, got -1.0"),
    (dict(tendon="compliant", solver="optax"), "tendon='compliant' is solved by the Newton route .* solver='optax'"),
    (dict(tendon="compliant", residual_weight=1.0), "tendon='compliant' .* residual_weight=1.0"),
    (dict(tolerance=-1.0), "tolerance must be a positive finite number, got -1.0"),
    (dict(max_steps=0), "max_steps must be an integer >= 1, got 0"),
    (dict(active_force="fibre"), r"active_force must be one of \('along_tendon', 'opensim'\), got 'fibre'"),
    (dict(active_force="opensim", tendon="compliant"), "active_force='opensim' is OpenSim's rigid-tendon F_A"),
])
def test_bad_options_are_refused(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        mb.static_optimization(_two_link(tmp_path), _TIME, _Q, **kwargs)


@pytest.mark.parametrize("bad", [np.inf, 0.0, np.nan])
def test_weights_must_be_positive_and_finite(tmp_path, bad):
    """Before: an infinite or NaN weight was accepted."""
    model = _two_link(tmp_path)
    weights = np.ones(len(model.muscles) + 2)  # the muscles, then the two reserves
    weights[0] = bad
    with pytest.raises(ValueError, match=rf"weights must be positive and finite; {model.muscle_names[0]} \({bad}\)"):
        mb.static_optimization(model, _TIME, _Q, weights=weights, actuators_extra=_reserves())


# ---- F_A: along the tendon, or as OpenSim's static optimization takes it ----

_HILL = json.loads((pathlib.Path(__file__).parent / "data" / "opensim" / "hill_muscles.json").read_text())
_HILL_MODELS = {  # the generator's models (tests/data/opensim/opensim_muscle_reference.py)
    "Thelen2003Muscle/compliant": lambda p: mb.Thelen2003Muscle(**p),
    "Thelen2003Muscle/rigid": lambda p: mb.Thelen2003Muscle(**p, compliant_tendon=False),
    "DeGrooteFregly2016Muscle/compliant": lambda p: mb.DeGrooteFregly2016Muscle(**p),
    "DeGrooteFregly2016Muscle/rigid": lambda p: mb.DeGrooteFregly2016Muscle(**p, compliant_tendon=False),
    "Millard2012EquilibriumMuscle/rigid": lambda p: mb.Millard2012EquilibriumMuscle(**p, compliant_tendon=False),
    "Millard2012EquilibriumMuscle/compliant": lambda p: mb.Millard2012EquilibriumMuscle(**p),
    "Millard2012EquilibriumMuscle/compliant_undamped": lambda p: mb.Millard2012EquilibriumMuscle(**p, fiber_damping=0.0),
}


@pytest.mark.parametrize("key", sorted(_HILL_MODELS))
def test_opensim_active_force_is_opensims_calc_inextensible_tendon_active_fiber_force(key):
    """`active_force="opensim"` takes each model's F_A as OpenSim 4.6's static optimization does
    (`calcInextensibleTendonActiveFiberForce(s, 1)`, over the reference's lengths and speeds):
    Thelen's along the tendon; De Groote's without cos(phi); Millard's with the pennation of the
    normalised fibre length. The hook is private; `rigid_tendon_forces` applies it."""
    ref = _HILL["models"][key]
    fm = _HILL_MODELS[key](_HILL["parameters"])
    lengths, speeds = (jnp.asarray(np.asarray(ref["muscle_length"]).ravel()),
                       jnp.asarray(np.broadcast_to(_HILL["speeds"], np.shape(ref["muscle_length"])).ravel()))
    s = jax.vmap(fm.inextensible_tendon_state)(jnp.ones_like(lengths), lengths, speeds)
    cos_phi = jnp.cos(s.pennation_angle)
    opensim = s.active_fiber_force * fm._opensim_rigid_tendon_cosine(s.fiber_length, cos_phi)
    want = np.asarray(ref["static_optimization_active_force"]).ravel()
    np.testing.assert_allclose(np.asarray(opensim), want, rtol=1e-9, atol=1e-9)
    along = np.asarray(s.active_fiber_force * cos_phi)
    if key.startswith("Thelen"):
        np.testing.assert_array_equal(np.asarray(opensim), along)
    else:  # pennated (0.209 rad): OpenSim's is stronger by up to 1 / cos(phi)
        assert np.max(np.asarray(opensim) / np.where(along > 0, along, 1.0)) > 1.02


def test_static_optimization_takes_opensims_active_force_when_asked(tmp_path, capsys):
    """A pennated Millard muscle: with `active_force="opensim"` its column of the constraint is
    OpenSim's F_A (stronger than along the tendon), so it needs less activation; the default
    and Thelen's are along the tendon."""
    text = _TWO_LINK.replace("Thelen2003Muscle", "Millard2012EquilibriumMuscle").replace(
        "<max_isometric_force>", "<pennation_angle_at_optimal>0.4</pennation_angle_at_optimal><max_isometric_force>"
    ).replace("<tendon_slack_length>0.2<", "<tendon_slack_length>0.6<")  # fibres near optimal (0.3 m)
    (tmp_path / "millard.osim").write_text(text)
    model = mb.load_osim(tmp_path / "millard.osim")
    along, opensim = (mb.static_optimization(model, _TIME, _Q, actuators_extra=_reserves(), active_force=f)
                      for f in ("along_tendon", "opensim"))
    column, base = np.asarray(opensim.constraint_matrix[:, :, 0]), np.asarray(along.constraint_matrix[:, :, 0])
    moves = np.abs(base) > 1e-9  # the muscle's moment arm about the coordinate
    assert moves.sum() >= 20
    ratio = column[moves] / base[moves]
    assert 1.05 < float(ratio.min()) and float(ratio.max()) < 1.0 / np.cos(0.45)
    assert bool(jnp.all(opensim.result == mb.RESULTS.successful))
    assert float(jnp.max(opensim.torque_residual)) < 1e-10
    # The command's flag is the same option.
    (tmp_path / "reserves.xml").write_text(_RESERVES)
    mb.io.write_storage(tmp_path / "motion.mot", mb.io.MotionData(_TIME, ("q1", "q2"), _Q, in_degrees=False))
    args = ["static-optimization", str(tmp_path / "millard.osim"), str(tmp_path / "motion.mot"), "--out",
            str(tmp_path / "so"), "--actuators", str(tmp_path / "reserves.xml"), "--compile-cache", "none"]
    assert main(args) == 0  # the default says what the flag would change
    assert "note: 1 of 1 muscles (flexor) are pennated De Groote or Millard" in capsys.readouterr().out
    assert main(args + ["--opensim-active-force"]) == 0
    assert "note:" not in capsys.readouterr().out
    written = mb.io.read_storage(tmp_path / "so" / "millard_StaticOptimization_activation.sto")
    def unknowns(so):
        return np.hstack([np.asarray(so.activations), np.asarray(so.controls)])

    np.testing.assert_allclose(written.values, unknowns(opensim), rtol=0, atol=1e-9)
    assert float(np.max(np.abs(written.values - unknowns(along)))) > 1e-3  # the reserves make up less
    thelen = _two_link(tmp_path)
    a, b = (mb.static_optimization(thelen, _TIME, _Q, actuators_extra=_reserves(), active_force=f)
            for f in ("along_tendon", "opensim"))
    np.testing.assert_array_equal(np.asarray(a.constraint_matrix), np.asarray(b.constraint_matrix))


# ---- moments vs accelerations ----


def test_imposed_acceleration_matching_equals_moment_matching(tmp_path):
    model = _two_link(tmp_path)
    moments = mb.static_optimization(model, _TIME, _Q, actuators_extra=_reserves())
    accelerations = mb.static_optimization(model, _TIME, _Q, actuators_extra=_reserves(), matching="accelerations")
    assert bool(jnp.all(accelerations.result == mb.RESULTS.successful))
    assert float(jnp.max(accelerations.torque_residual)) < 1e-10
    x_m = np.hstack([moments.activations, moments.controls])
    x_a = np.hstack([accelerations.activations, accelerations.controls])
    np.testing.assert_allclose(x_a, x_m, rtol=0, atol=1e-10)


def _penalised(B, b, E, w, lo, hi, c, p):
    """The penalised problem by scipy's L-BFGS-B (an independent route)."""
    def cost(x):
        e = E @ (B @ x - b)
        return np.sum(w * np.abs(x) ** p) + c * np.sum(np.abs(e) ** p)

    def grad(x):
        e = E @ (B @ x - b)
        return p * w * np.sign(x) * np.abs(x) ** (p - 1) + B.T @ (E.T @ (c * p * np.sign(e) * np.abs(e) ** (p - 1)))

    res = minimize(cost, np.clip(np.zeros(B.shape[1]), lo, hi), jac=grad, method="L-BFGS-B",
                   bounds=list(zip(lo, hi)), options={"ftol": 1e-15, "gtol": 1e-13, "maxiter": 5000})
    return res.x


def test_penalised_matching_of_an_unbalanced_motion(tmp_path):
    # No muscle or actuator crosses q2: the balance cannot hold; penalised, the flexor's
    # activation depends on how the residual is measured (M⁻¹ couples q1 and q2).
    model = _two_link(tmp_path)
    so = mb.static_optimization(model, _TIME, _Q, residual_weight=1e-3)
    assert bool(jnp.all(so.result == mb.RESULTS.successful)) and float(jnp.min(so.torque_residual)) > 1.0
    bounds = (jnp.ones(1), jnp.full(1, 0.01), jnp.ones(1))
    out = {}
    for matching in ("moments", "accelerations"):  # the same frames through both per-frame solvers
        problem = _matching(model, so.q, so.constraint_matrix, so.constraint_target, *bounds, matching, 1e-3)
        out[matching] = np.asarray(_solve(*problem, 2.0, 1e-12, 50)[0][:, :1])
        optax = np.asarray(_solve_optax(*problem, 2.0, 1e-12, 20000)[0][:, :1])
        np.testing.assert_allclose(optax, out[matching], rtol=0, atol=1e-8)
        for k in (0, 7, 13):
            E = np.eye(2) if matching == "moments" else np.linalg.inv(np.asarray(_mass_matrix(model, so.q[k])))
            expected = _penalised(np.asarray(so.constraint_matrix[k]), np.asarray(so.constraint_target[k]), E,
                                  np.ones(1), np.array([0.01]), np.ones(1), 1e-3, 2.0)
            np.testing.assert_allclose(out[matching][k], expected, rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.asarray(so.activations), out["moments"], rtol=0, atol=1e-12)
    assert np.max(np.abs(out["moments"] - out["accelerations"])) > 1e-2


@pytest.mark.slow
def test_arm26_optax_route_equals_newtons():
    data = pathlib.Path(__file__).parent / "data" / "opensim" / "motion"
    model = mb.load_osim(data / "arm26.osim")
    motion = mb.io.read_storage(data / "arm26_InverseKinematics.mot")
    q = mb.io.coordinates_from_motion(model, motion)
    kw = dict(lowpass_hz=6.0, time_range=(0.4, 0.5))
    newton = mb.static_optimization(model, motion.time, q, **kw)
    so = mb.static_optimization(model, motion.time, q, solver="optax", **kw)
    assert so.time.size >= 5 and bool(jnp.all(so.result == mb.RESULTS.successful))
    assert float(jnp.max(so.torque_residual)) < 1e-8 and float(jnp.max(so.kkt_residual)) < 1e-10
    np.testing.assert_allclose(np.asarray(so.activations), np.asarray(newton.activations), rtol=0, atol=1e-6)
