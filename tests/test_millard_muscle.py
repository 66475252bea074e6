"""Millard et al. (2013)'s musculotendon model (jaxmb._muscles: _bezier, _millard_curves, _millard;
the importer's io/_osim_muscle_models).

Oracles: OpenSim 4.6 computing the same curves (``calcValue``, ``calcDerivative``) and the same
muscle at the same states (tests/data/opensim/hill_muscles.json, opensim_muscle_reference.py),
the Bezier identity ``x(u(x)) = x``, autodiff against the curves' slope ``(dy/du)/(dx/du)``,
central finite differences for gradients, and MoBL-ARMS's XML for imported parameters.
"""

import json
import pathlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb
from jaxmb._muscles import _millard_curves as MC
from jaxmb._muscles._bezier import SegmentedQuinticCurve, bezier, bezier_parameter
from jaxmb._muscles._millard import CURVE_PROPERTIES

DATA = pathlib.Path(__file__).parent / "data"
REF = json.loads((DATA / "opensim" / "hill_muscles.json").read_text())
P = REF["parameters"]
CURVES = REF["millard_curves"]
MOBL = pathlib.Path("/work/shared/models/MOBL_ARMS_fixed_41.osim")
TOL_CURVE = 1e-9  # relative to max(|OpenSim|, 1): both evaluate the same Bezier to round-off
TOL_RESIDUAL = 1e-10  # N
TOL_FD = 1e-6  # relative; central differences with Richardson extrapolation
# steps: 1e-3 relative for activation and parameters; 2e-5 relative for lengths (the curves are
# C2 piecewise quintics with steep toes: Richardson's O(h^4) needs steps within one segment)
# OpenSim's equilibrium stops at |F_M cos(phi) - F_T| < 1e-8 F_max (estimateMuscleFiberState);
# jaxmb's residual is ~1e-11 N, so OpenSim's forces are within its tolerance of jaxmb's.
TOL_EQUILIBRIUM = 1e-8 * P["max_isometric_force"]


def _curves(params):
    """The four curves of OpenSim's curve classes (no muscle-level parameter updates)."""
    g = {f: d for f, (_, _, d) in CURVE_PROPERTIES.items()}
    g.update(params)
    if g["passive_stiffness_at_low_force"] is None:
        g.update(zip(("passive_stiffness_at_low_force", "passive_stiffness_at_one_norm_force", "passive_curviness"),
                     MC.FIBER_DEFAULTS(g["passive_strain_at_zero_force"], g["passive_strain_at_one_norm_force"])))
    if g["tendon_curviness"] is None:
        g.update(zip(("tendon_stiffness_at_one_norm_force", "tendon_norm_force_at_toe_end", "tendon_curviness"),
                     MC.TENDON_DEFAULTS(g["tendon_strain_at_one_norm_force"])))
    built = {
        "ActiveForceLengthCurve": MC.active_force_length_curve(
            g["active_min_norm_fiber_length"], g["active_transition_norm_fiber_length"],
            g["active_max_norm_fiber_length"], g["active_shallow_ascending_slope"], g["active_minimum_value"]),
        "ForceVelocityCurve": MC.force_velocity_curve(
            g["fv_concentric_slope_at_vmax"], g["fv_concentric_slope_near_vmax"], g["fv_isometric_slope"],
            g["fv_eccentric_slope_at_vmax"], g["fv_eccentric_slope_near_vmax"], g["fv_max_eccentric_multiplier"],
            g["fv_concentric_curviness"], g["fv_eccentric_curviness"]),
        "FiberForceLengthCurve": MC.fiber_force_length_curve(
            g["passive_strain_at_zero_force"], g["passive_strain_at_one_norm_force"],
            g["passive_stiffness_at_low_force"], g["passive_stiffness_at_one_norm_force"], g["passive_curviness"]),
        "TendonForceLengthCurve": MC.tendon_force_length_curve(
            g["tendon_strain_at_one_norm_force"], g["tendon_stiffness_at_one_norm_force"],
            g["tendon_norm_force_at_toe_end"], g["tendon_curviness"]),
    }
    return {k: SegmentedQuinticCurve(*(jnp.asarray(a, dtype=float) for a in v)) for k, v in built.items()}


# (value, slope, autodiff slope) of a curve on a grid; one compilation per number of segments
_CURVE = eqx.filter_jit(lambda c, x: jax.vmap(lambda y: (*c(y), jax.grad(lambda z: c(z)[0])(y)))(x))


# ----------------------------------------------------------------------------------------------
# curves
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("label", sorted(CURVES))
def test_curves_equal_opensim(label):
    """calcValue and calcDerivative of OpenSim 4.6's curve classes, on grids that cross every
    segment and both linear extrapolations."""
    built = _curves(CURVES[label]["parameters"])
    for name, curve in built.items():
        ref = {k: np.asarray(v) for k, v in CURVES[label][name].items()}
        value, slope, autodiff = _CURVE(curve, jnp.asarray(ref["x"]))
        assert ref["x"][0] < float(curve.px[0, 0]) and ref["x"][-1] > float(curve.px[-1, 5])  # both extrapolations
        for got, want in ((value, ref["value"]), (slope, ref["derivative"])):
            err = np.abs(np.asarray(got) - want) / np.maximum(np.abs(want), 1.0)
            assert err.max() < TOL_CURVE, (label, name, err.max())
        # autodiff through the implicit u(x) gives the same slope (dy/du)/(dx/du)
        np.testing.assert_allclose(autodiff, slope, rtol=1e-12, atol=1e-12)


def test_curve_parameter_solve_reaches_round_off():
    """x(u(x)) = x to the round-off of the polynomial on every segment of every reference curve (12 safeguarded
    Newton steps from the chord guess), also at the segments' ends."""
    solve = jax.jit(jax.vmap(lambda x, p: bezier(bezier_parameter(x, p), p), in_axes=(0, None)))
    for label in CURVES:
        for curve in _curves(CURVES[label]["parameters"]).values():
            for p in curve.px:
                x = jnp.linspace(p[0], p[5], 201)
                assert float(jnp.max(jnp.abs(solve(x, p) - x))) < 32 * np.finfo(float).eps * float(jnp.max(jnp.abs(x)))


def test_curves_built_traced_equal_numpy():
    """The jax.numpy construction (used where parameters are traced, e.g. under jax.grad) equals
    the NumPy one (used for concrete parameters)."""
    m = mb.Millard2012EquilibriumMuscle(**P, **CURVES["other"]["parameters"])
    traced = jax.jit(lambda e: mb.Millard2012EquilibriumMuscle(
        **P, **{**CURVES["other"]["parameters"], "tendon_strain_at_one_norm_force": e}).curves())(
        CURVES["other"]["parameters"]["tendon_strain_at_one_norm_force"])
    for a, b in zip(jax.tree_util.tree_leaves(m.curves()), jax.tree_util.tree_leaves(traced)):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-15)


# ----------------------------------------------------------------------------------------------
# forces: OpenSim 4.6 parity
# ----------------------------------------------------------------------------------------------
MODELS = {
    "rigid": mb.Millard2012EquilibriumMuscle(**P, compliant_tendon=False),
    "compliant": mb.Millard2012EquilibriumMuscle(**P),
    "compliant_undamped": mb.Millard2012EquilibriumMuscle(**P, fiber_damping=0.0),
    "compliant_delt1": mb.Millard2012EquilibriumMuscle(**P, **CURVES["delt1"]["parameters"]),
}
_EVAL = eqx.filter_jit(lambda m, a, l, v: jax.vmap(m.__call__)(a, l, v))
_GRID = tuple(x.ravel() for x in np.meshgrid(REF["activations"], REF["muscle_lengths"], REF["speeds"], indexing="ij"))


def _ref(key):
    return {k: np.asarray(v).ravel() for k, v in REF["models"][f"Millard2012EquilibriumMuscle/{key}"].items()}


def _states(model):
    a, _, v = _GRID
    return _EVAL(model, jnp.asarray(a), jnp.asarray(_ref("rigid")["muscle_length"]), jnp.asarray(v))


STATES = {k: _states(m) for k, m in MODELS.items()}


def test_rigid_tendon_equals_opensim():
    """ignore_tendon_compliance: the same closed forms (OpenSim's damped model by default, with
    its fibre damping, its zero active-curve minimum and its clamped shortest fibre)."""
    ref, r = _ref("rigid"), STATES["rigid"]
    for field in ("fiber_length", "pennation_angle", "fiber_velocity", "active_fiber_force", "passive_fiber_force",
                  "tendon_force"):
        np.testing.assert_allclose(getattr(r, field), ref[field], rtol=1e-12, atol=1e-12, err_msg=field)
    assert np.all(np.asarray(r.equilibrium_residual) == 0.0)


@pytest.mark.parametrize("key", ["compliant", "compliant_undamped", "compliant_delt1", "compliant_velocity"])
def test_compliant_tendon_equals_opensim(key):
    """computeInitialFiberEquilibrium (and computeFiberEquilibrium(s, true), which OpenSim 4.6
    also solves at zero fibre velocity), then OpenSim's forces at that state: equal to what
    OpenSim's equilibrium tolerance (1e-8 F_max) allows, at every v_MT."""
    ref, r = _ref(key), STATES[key.replace("_velocity", "")]
    np.testing.assert_allclose(r.fiber_length, ref["fiber_length"], rtol=1e-9)
    np.testing.assert_allclose(r.pennation_angle, ref["pennation_angle"], rtol=1e-9)
    for field in ("active_fiber_force", "passive_fiber_force", "tendon_force"):
        np.testing.assert_allclose(getattr(r, field), ref[field], rtol=0, atol=TOL_EQUILIBRIUM, err_msg=field)
    # OpenSim reads its fibre velocity back from the damped force balance at its (inexact)
    # equilibrium: zero to within its tolerance; jaxmb's is 0
    assert np.all(np.asarray(r.fiber_velocity) == 0.0) and np.max(np.abs(ref["fiber_velocity"])) < 1e-6


@pytest.mark.parametrize("key", ["compliant", "compliant_undamped", "compliant_delt1"])
def test_compliant_equilibrium_residual(key):
    r = STATES[key]
    taut = np.asarray(r.tendon_length) > P["tendon_slack_length"] * (1 + 1e-9)
    assert taut.sum() > 0.8 * taut.size
    assert np.max(np.abs(np.asarray(r.equilibrium_residual)[taut])) < TOL_RESIDUAL
    np.testing.assert_allclose(r.fiber_length * jnp.cos(r.pennation_angle) + r.tendon_length,
                               _ref("rigid")["muscle_length"], rtol=1e-13)


def test_parameter_updates_follow_opensim():
    """The damped model and the rigid tendon zero the active curve's minimum and the slopes at
    vmax; the classic model raises them (extendFinalizeFromProperties)."""
    fl_min = {k: float(m.active_force_length.py[0, 0]) for k, m in MODELS.items()}
    assert fl_min == {"rigid": 0.0, "compliant": 0.0, "compliant_undamped": 0.1, "compliant_delt1": 0.0}
    assert float(MODELS["compliant_undamped"].force_velocity.slope_below) == 0.5 * 0.25
    assert float(MODELS["compliant_undamped"].force_velocity.slope_above) == 0.5 * 0.15
    assert float(MODELS["compliant"].force_velocity.slope_below) == 0.0


# ----------------------------------------------------------------------------------------------
# gradients
# ----------------------------------------------------------------------------------------------
_GRAD = eqx.filter_jit(jax.grad(lambda m, a, l, v: m.tendon_force(a, l, v), argnums=(0, 1, 2)))
_K = len(_GRID[0])


def _f(*xs):
    return tuple(jnp.asarray(x, dtype=float) for x in xs)


def _tendon(m, a, l, v):
    """Tendon forces at up to _K states, through the parity evaluation (no new compilation)."""
    shape = np.broadcast(np.atleast_1d(a), l, v).shape
    a, l, v = (np.broadcast_to(np.asarray(x, dtype=float), shape) for x in (a, l, v))
    n = a.shape[0]
    pad = lambda x: jnp.asarray(np.concatenate([x, np.full(_K - n, x[0])]))  # noqa: E731
    return np.asarray(_EVAL(m, pad(a), pad(l), pad(v)).tendon_force)[:n]


def _richardson(f, x, h):
    """Central differences with Richardson extrapolation (error O(h^4)); `f` is vectorised."""
    fp1, fm1, fp2, fm2 = f(np.array([x + h, x - h, x + h / 2, x - h / 2]))
    return (4 * (fp2 - fm2) / h - (fp1 - fm1) / (2 * h)) / 3


@pytest.mark.parametrize("name", ["rigid", "compliant"])
def test_gradient_matches_finite_differences(name):
    m = MODELS[name]
    a0, v0 = 0.6, 0.1
    l0 = P["tendon_slack_length"] + 1.05 * P["optimal_fiber_length"]
    gm, ga, gl = _GRAD(m, *_f(a0, l0, v0))
    for g, fd in ((ga, _richardson(lambda a: _tendon(m, a, l0, v0), a0, 1e-3)),
                  (gl, _richardson(lambda l: _tendon(m, a0, l, v0), l0, 2e-5 * l0))):
        assert abs(g - fd) < TOL_FD * abs(fd), (g, fd)
    for field in ("max_isometric_force", "tendon_slack_length", "optimal_fiber_length"):
        x = float(getattr(m, field))
        fd = _richardson(lambda ys: np.array([_tendon(eqx.tree_at(lambda mm: getattr(mm, field), m, jnp.asarray(y)),
                                                      a0, l0, v0)[0] for y in ys]), x, 2e-5 * x)
        assert abs(getattr(gm, field) - fd) < TOL_FD * max(abs(fd), 1.0), (field, getattr(gm, field), fd)


def _curve_parameter_gradient(field, x0, compliant, l0):
    def force(x):
        m = mb.Millard2012EquilibriumMuscle(**P, compliant_tendon=compliant, **{field: x})
        return m.tendon_force(0.8, l0, 0.05)

    g = jax.jit(jax.grad(force))(x0)
    f = jax.jit(jax.vmap(force))
    fd = _richardson(lambda xs: np.asarray(f(jnp.asarray(xs))), x0, 2e-5 * x0)
    assert abs(g - fd) < TOL_FD * abs(fd), (g, fd)


def test_gradient_reaches_curve_parameters():
    """Built inside the differentiated function, the curves carry gradients to their
    parameters: d F_T / d passive strain at one norm force, rigid tendon, stretched fibre."""
    _curve_parameter_gradient("passive_strain_at_one_norm_force", 0.7, False,
                              P["tendon_slack_length"] + 1.4 * P["optimal_fiber_length"])


@pytest.mark.slow
def test_gradient_reaches_curve_parameters_through_the_equilibrium():
    _curve_parameter_gradient("tendon_strain_at_one_norm_force", 0.049, True,
                              P["tendon_slack_length"] * 1.03 + P["optimal_fiber_length"])


@pytest.mark.parametrize("name", ["rigid", "compliant"])
def test_gradient_free_of_nan_at_zero_activation_and_full_stretch(name):
    m = MODELS[name]
    for l0 in (P["tendon_slack_length"] + 1.8 * P["optimal_fiber_length"], P["tendon_slack_length"] * 0.9):
        for leaf in jax.tree_util.tree_leaves(_GRAD(m, *_f(0.0, l0, 0.0))):
            assert np.all(np.isfinite(leaf))


def test_float32_evaluation():
    """In float32 the curves (their u solve) and the rigid-tendon forces keep float32 and agree
    with float64 to float32's precision (the compliant equilibrium's float32 behaviour is the
    family's, tested in test_hill_muscles)."""
    m = jax.tree_util.tree_map(lambda x: x.astype(jnp.float32), MODELS["rigid"])
    a, l, v = (jnp.asarray(x, dtype=jnp.float32) for x in (_GRID[0], _ref("rigid")["muscle_length"], _GRID[2]))
    r = _EVAL(m, a, l, v)
    assert r.tendon_force.dtype == jnp.float32
    np.testing.assert_allclose(r.tendon_force, STATES["rigid"].tendon_force, rtol=0,
                               atol=2e-5 * P["max_isometric_force"])


# ----------------------------------------------------------------------------------------------
# import
# ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mobl():
    if not MOBL.exists():
        pytest.skip(f"{MOBL} not present")
    return mb.load_osim(MOBL)


@pytest.mark.filterwarnings("ignore:.*triangle inequality")
def test_mobl_arms_muscles_import(mobl):
    """All 50 muscles of MoBL-ARMS become Millard models with the XML's parameters (DELT1:
    F_max 1218.9 N, l_o 0.0976 m, l_s 0.093 m, its curves; fiber_damping absent -> 0.1)."""
    assert len(mobl.muscles) == 50
    assert all(isinstance(m.force_model, mb.Millard2012EquilibriumMuscle) for m in mobl.muscles)
    delt1 = mobl.muscles[mobl.muscle_names.index("DELT1")].force_model
    assert (float(delt1.max_isometric_force), float(delt1.optimal_fiber_length), float(delt1.tendon_slack_length),
            float(delt1.pennation_angle_at_optimal)) == (1218.9, 0.0976, 0.093, 0.38397244)
    assert delt1.compliant_tendon and delt1.damped and float(delt1.fiber_damping) == 0.1
    assert float(delt1.minimum_activation) == 0.0
    assert float(delt1.active_force_length.px[0, 0]) == 0.4327  # min_norm_active_fiber_length
    assert float(delt1.passive_force_length.slope_above) == 6.3163  # stiffness_at_one_norm_force
    assert float(delt1.tendon_force_length.slope_above) == 37.393
    # its curves are the reference DELT1 curves
    ref = MODELS["compliant_delt1"]
    for a, b in zip(jax.tree_util.tree_leaves(delt1.curves()), jax.tree_util.tree_leaves(ref.curves())):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*triangle inequality")
def test_mobl_arms_muscle_forces(mobl):
    """mb.muscle_forces of all 50 muscles (one vmap) at given lengths: each equals its own model,
    the compliant equilibria to below 1e-10 N."""
    n = len(mobl.muscles)
    fm = [m.force_model for m in mobl.muscles]
    lengths = jnp.asarray([float(m.tendon_slack_length) * 1.02 + float(m.optimal_fiber_length) for m in fm])
    a, v = jnp.linspace(0.0, 1.0, n), jnp.linspace(-0.2, 0.2, n)
    s = jax.jit(lambda a, l, v: mb.muscle_states(mobl, a, l, v))(a, lengths, v)
    assert np.max(np.abs(np.asarray(s.equilibrium_residual))) < TOL_RESIDUAL
    i = mobl.muscle_names.index("DELT1")
    k = len(_GRID[0])  # the compiled parity evaluation, DELT1's state broadcast
    one = _EVAL(fm[i], jnp.full(k, a[i]), jnp.full(k, lengths[i]), jnp.full(k, v[i]))
    np.testing.assert_allclose(s.tendon_force[i], one.tendon_force[0], rtol=1e-12)


_TEMPLATE = (DATA / "broken_osim" / "path_point_nan_location.osim").read_text().replace(
    "nan 0.1 0", "0.1 0.1 0").replace("Thelen2003Muscle", "Millard2012EquilibriumMuscle")


def _curve_xml(curve, **props):
    return f"<{curve}>" + "".join(f"<{k}>{v}</{k}>" for k, v in props.items()) + f"</{curve}>"


_SLACK = "<tendon_slack_length>0.2</tendon_slack_length>"


def test_import_reads_curve_properties(tmp_path):
    text = _TEMPLATE.replace(_SLACK, _SLACK + "<ignore_tendon_compliance>true</ignore_tendon_compliance>"
                             + "<deactivation_time_constant>0.05</deactivation_time_constant>"
                             + _curve_xml("TendonForceLengthCurve", strain_at_one_norm_force=0.04,
                                          stiffness_at_one_norm_force=40, norm_force_at_toe_end=0.5, curviness=0.7)
                             + _curve_xml("ActiveForceLengthCurve", max_norm_active_fiber_length=1.7))
    p = tmp_path / "m.osim"
    p.write_text(text)
    muscle = mb.load_osim(p).muscles[0]
    fm = muscle.force_model
    assert isinstance(fm, mb.Millard2012EquilibriumMuscle) and not fm.compliant_tendon
    act = muscle.activation_dynamics  # OpenSim's Millard defaults: 0.01 s activation, 0.01 minimum
    assert (float(act.activation_time_constant), float(act.deactivation_time_constant),
            float(act.minimum_activation)) == (0.01, 0.05, 0.01)
    p.write_text(text.replace(_SLACK, _SLACK + "<ignore_activation_dynamics>true</ignore_activation_dynamics>"))
    assert mb.load_osim(p).muscles[0].activation_dynamics is None
    assert float(fm.tendon_force_length.slope_above) == 40.0
    assert float(fm.active_force_length.px[-1, 5]) == 1.7


@pytest.mark.parametrize("insert, match", [
    (_curve_xml("ActiveForceLengthCurve", min_norm_active_fiber_length=0.8), "min_norm_active_fiber_length"),
    (_curve_xml("ForceVelocityCurve", max_eccentric_velocity_force_multiplier=0.9),
     "max_eccentric_velocity_force_multiplier must be greater than 1"),
    (_curve_xml("FiberForceLengthCurve", stiffness_at_low_force=0.2, stiffness_at_one_norm_force=1.0, curviness=0.5),
     "stiffness_at_one_norm_force must be greater than"),
    (_curve_xml("TendonForceLengthCurve", stiffness_at_one_norm_force=40, norm_force_at_toe_end=1.5, curviness=0.5),
     r"norm_force_at_toe_end must be in \(0, 1\)"),
    (_curve_xml("TendonForceLengthCurve", curviness=0.5), "give all of"),
    (_curve_xml("ActiveForceLengthCurve", minimum_value=-0.1), "minimum_value must be non-negative"),
    ("<fiber_damping>0</fiber_damping><minimum_activation>0</minimum_activation>",
     "minimum_activation must be at least 0.01"),
    ("<fiber_damping>-0.1</fiber_damping>", "fiber_damping must be non-negative"),
    ("<max_isometric_force>-5</max_isometric_force>", "max_isometric_force must be positive"),
])
def test_bad_millard_parameters_name_the_muscle_and_line(tmp_path, insert, match):
    text = _TEMPLATE
    if insert.startswith("<max_isometric_force>"):
        text = text.replace("<max_isometric_force>100<", "<max_isometric_force>-5<")
    else:
        text = text.replace(_SLACK, _SLACK + insert)
    p = tmp_path / "bad.osim"
    p.write_text(text)
    with pytest.raises(mb.ModelError, match=match) as exc:
        mb.load_osim(p)
    msg = str(exc.value)
    assert "muscle 'flexor'" in msg.lower() and f"{p}:" in msg, msg
