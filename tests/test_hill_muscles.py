"""Hill-type musculotendon force models (jaxmb._muscles: _curves, _musculotendon, _thelen, _degroote,
_activation, _muscle_forces; the importer's io/_osim_muscle_models).

Oracles: the papers' published values (Thelen 2003; De Groote et al. 2016 with OpenSim's
adjusted constants), closed-form derivatives against jax.jacfwd, OpenSim's own velocity formula
(Thelen 2003, Eq. 6-7, transcribed from Thelen2003Muscle::calcdlceN) against the closed-form
inverse, central finite differences for gradients, and OpenSim 4.6 computing the same muscle at
the same states (tests/data/opensim/hill_muscles.json, opensim_muscle_reference.py).
"""

import json
import math
import pathlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb
from jaxmb._muscles import _curves as C

DATA = pathlib.Path(__file__).parent / "data"
REF = json.loads((DATA / "opensim" / "hill_muscles.json").read_text())
P = REF["parameters"]
TOL_EXACT = 1e-12
TOL_RESIDUAL = 1e-10  # N
TOL_FD = 1e-6  # relative; central differences with Richardson extrapolation, steps 1e-3 relative


# ----------------------------------------------------------------------------------------------
# curves: published values
# ----------------------------------------------------------------------------------------------
def test_thelen_curves_published_values():
    assert abs(C.thelen_active_force_length(1.0) - 1.0) < TOL_EXACT
    assert abs(C.thelen_active_force_length(1.0 + math.sqrt(0.45)) - math.exp(-1.0)) < TOL_EXACT  # gamma = 0.45
    assert abs(C.thelen_passive_force_length(1.6) - 1.0) < TOL_EXACT  # FmaxMuscleStrain 0.6
    assert C.thelen_passive_force_length(0.9) == 0.0
    assert abs(C.thelen_tendon_force(1.04) - 1.0) < TOL_EXACT  # FmaxTendonStrain 0.04
    assert abs(C.thelen_tendon_force(1.0 + 0.05, 0.05) - 1.0) < TOL_EXACT
    assert C.thelen_tendon_force(0.99) == 0.0
    # Thelen (2003) prints the rounded eToe = 0.609 e0 and klin = 1.712 / e0
    assert abs(C.THELEN_ETOE_PER_STRAIN - 0.609) < 5e-4
    klin = float(C.thelen_tendon_stiffness(1.035))
    assert abs(klin * 0.04 - 1.712) < 5e-3
    assert abs(C.thelen_tendon_force(1.0 + C.THELEN_ETOE_PER_STRAIN * 0.04) - 0.33) < TOL_EXACT  # Ftoe
    # force-velocity: isometric 1, maximal shortening 0 at full activation, C0 at the branches
    assert abs(C.thelen_force_velocity(0.0, 1.0) - 1.0) < TOL_EXACT
    assert abs(C.thelen_force_velocity(-1.0, 1.0)) < TOL_EXACT
    assert abs(C.thelen_force_velocity(-0.25 - 0.75 * 0.3, 0.3)) < TOL_EXACT
    k, c = 1.0, (2 + 2 / 0.25) / 0.4
    v_e0 = k * (0.95 * 1.4 - 1) / (c * 1.4 * 0.05)
    assert abs(C.thelen_force_velocity(v_e0, 1.0) - 0.95 * 1.4) < TOL_EXACT
    assert abs(C.thelen_force_velocity(v_e0 * (1 + 1e-12), 1.0) - 0.95 * 1.4) < 1e-9


def test_degroote_curves_published_values():
    assert abs(C.degroote_active_force_length(1.0) - 1.0) < 1e-9  # b11 adjusted so f(1) = 1
    assert abs(C.degroote_force_velocity(0.0) - 1.0) < TOL_EXACT
    assert abs(C.degroote_force_velocity(-1.0)) < TOL_EXACT
    assert abs(C.degroote_force_velocity(1.0) - 1.794) < 1e-3  # OpenSim's documented range [0, 1.794]
    assert abs(C.degroote_tendon_force(1.0)) < TOL_EXACT
    assert abs(C.degroote_tendon_force(1.049) - 1.0) < TOL_EXACT
    assert abs(C.degroote_passive_force_length(0.2)) < TOL_EXACT
    assert abs(C.degroote_passive_force_length(1.6) - 1.0) < TOL_EXACT
    # De Groote et al. (2016): kT = 35 is the stiffness of a tendon strained 4.9 % ... at ln(6)/35
    assert abs(C.degroote_tendon_stiffness_parameter(math.log(6.0) / 35.0) - 35.0) < 1e-10
    v = jnp.linspace(-1.0, 1.0, 21)
    np.testing.assert_allclose(C.degroote_force_velocity_inverse(C.degroote_force_velocity(v)), v, atol=1e-12)


def _thelen_dlcen(a, fal, fm, af=0.25, flen=1.4, thresh=0.95):
    """OpenSim's Thelen2003Muscle::calcdlceN, transcribed line by line (Thelen 2003, Eq. 6-7)."""
    afl = a * fal
    asy_e = afl * flen
    if 0 < fm < asy_e * thresh:
        b = afl + fm / af if fm <= afl else ((2 + 2 / af) * (afl * flen - fm)) / (flen - 1)
        return (0.25 + 0.75 * a) * (fm - afl) / b
    if fm <= 0:
        fm0, b, db = 0.0, afl, 1 / af
    else:
        fm0 = thresh * asy_e
        b, db = ((2 + 2 / af) * (afl * flen - fm0)) / (flen - 1), ((2 + 2 / af) * (-1)) / (flen - 1)
    dlce0 = (0.25 + 0.75 * a) * (fm0 - afl) / b
    slope = (0.25 + 0.75 * a) / b - ((0.25 + 0.75 * a) * (fm0 - afl) / (b * b)) * db
    return dlce0 + slope * (fm - fm0)


@pytest.mark.parametrize("a", [0.01, 0.3, 1.0])
def test_thelen_force_velocity_inverts_opensims_velocity(a):
    fal = 0.7
    for fv in [0.05, 0.4, 0.99, 1.0, 1.2, 1.3, 1.33, 1.4, 1.6]:
        v = _thelen_dlcen(a, fal, a * fal * fv)
        assert abs(float(C.thelen_force_velocity(v, a)) - fv) < 1e-12, (a, fv)


def test_curve_derivatives_match_closed_forms():
    lt = jnp.array([0.99, 1.005, 1.02, 1.03, 1.05])
    np.testing.assert_allclose(jax.vmap(jax.grad(C.thelen_tendon_force))(lt), C.thelen_tendon_stiffness(lt), rtol=1e-12)
    lm = jnp.array([0.5, 0.9, 1.2, 1.7])
    np.testing.assert_allclose(jax.vmap(jax.grad(C.thelen_passive_force_length))(lm),
                               C.thelen_passive_stiffness(lm), rtol=1e-12)
    np.testing.assert_allclose(jax.vmap(jax.grad(C.thelen_active_force_length))(lm),
                               -2 * (lm - 1) / 0.45 * C.thelen_active_force_length(lm), rtol=1e-12)
    d1, d2, d3, _ = C.DEGROOTE_D
    v = jnp.linspace(-1, 1, 7)
    np.testing.assert_allclose(jax.vmap(jax.grad(C.degroote_force_velocity))(v),
                               d1 * d2 / jnp.sqrt((d2 * v + d3) ** 2 + 1), rtol=1e-12)
    kt = C.degroote_tendon_stiffness_parameter(0.049)
    np.testing.assert_allclose(jax.vmap(jax.grad(C.degroote_tendon_force))(lt), 0.2 * kt * jnp.exp(kt * (lt - 1)),
                               rtol=1e-12)


# ----------------------------------------------------------------------------------------------
# models: equilibrium, gradients
# ----------------------------------------------------------------------------------------------
def _models():
    kw = dict(P)
    return {"thelen_compliant": mb.Thelen2003Muscle(**kw), "thelen_rigid": mb.Thelen2003Muscle(**kw, compliant_tendon=False),
            "degroote_compliant": mb.DeGrooteFregly2016Muscle(**kw),
            "degroote_rigid": mb.DeGrooteFregly2016Muscle(**kw, compliant_tendon=False)}


MODELS = _models()
_EVAL = eqx.filter_jit(lambda m, a, l, v: jax.vmap(m.__call__)(a, l, v))
_TENDON_JIT = eqx.filter_jit(lambda m, a, l, v: m.tendon_force(a, l, v))
_GRAD_JIT = eqx.filter_jit(jax.grad(lambda m, a, l, v: m.tendon_force(a, l, v), argnums=(0, 1)))


def _arrays(*xs):  # filter_jit treats Python floats as static: one compilation per value otherwise
    return tuple(jnp.asarray(x, dtype=float) for x in xs)


def _TENDON(m, a, l, v):
    return _TENDON_JIT(m, *_arrays(a, l, v))


def _GRAD(m, a, l, v):
    return _GRAD_JIT(m, *_arrays(a, l, v))


@pytest.mark.parametrize("name", ["thelen_compliant", "degroote_compliant"])
def test_compliant_equilibrium_residual(name):
    m = MODELS[name]
    a, l, v = (x.ravel() for x in np.meshgrid([0.0, 0.2, 0.6, 1.0], REF["muscle_lengths"][1:], [-0.3, 0.0, 0.3],
                                              indexing="ij"))
    r = _EVAL(m, a, l, v)
    taut = np.asarray(r.tendon_length) > P["tendon_slack_length"] * (1 + 1e-9)
    assert taut.sum() > 0.8 * taut.size
    assert np.max(np.abs(np.asarray(r.equilibrium_residual)[taut])) < TOL_RESIDUAL
    # the returned state is consistent: fibre length along tendon + tendon = l_MT
    np.testing.assert_allclose(r.fiber_length * jnp.cos(r.pennation_angle) + r.tendon_length, l, rtol=1e-13)


def test_thelen_shortening_fast_stays_in_its_bracket_where_the_tendon_goes_slack():
    """gait2354's glut_med3_r (Thelen) at a = 0.5 shortening at 0.45 m/s or faster: the
    residual jumps where the tendon goes slack (the fibre takes the whole speed, its force
    falls to nothing), and the last Newton step, taken from the jump's other side, left the
    bracket: the fibre ended past the whole unit, the tendon at 130 F_max, silently. Over a
    sweep of speeds the tendon now stays between slack and 5 F_max, the state consistent."""
    m = mb.Thelen2003Muscle(1000.0, 0.0646, 0.053, 0.3491, 10.0)
    v = np.linspace(-1.0, 0.5, 61)
    r = _EVAL(m, np.full(61, 0.5), np.full(61, 0.1096), v)
    force, tendon = np.asarray(r.tendon_force), np.asarray(r.tendon_length)
    assert np.all((force >= 0.0) & (force <= 5000.0)) and np.all(tendon >= 0.053 - 1e-15)
    np.testing.assert_allclose(r.fiber_length * jnp.cos(r.pennation_angle) + r.tendon_length, 0.1096, rtol=1e-13)
    assert np.max(np.abs(np.asarray(r.equilibrium_residual))) < TOL_RESIDUAL
    assert force[v <= -0.45].max() < 1e-6 and force[v >= -0.4].min() > 1.0  # slack, then taut


@pytest.mark.parametrize("name", ["thelen_compliant", "degroote_compliant"])
def test_a_unit_stretched_past_the_bracket_gets_five_max_forces_and_says_it_is_not_in_equilibrium(name):
    """Stretched so far that the fibre would pull harder than 5 F_max, the tendon stops at the
    bracket's 5 F_max and the residual (fibre along the tendon minus tendon) is what tells."""
    m, F = MODELS[name], P["max_isometric_force"]
    l = P["tendon_slack_length"] + np.array([1.0, 4.0]) * P["optimal_fiber_length"]
    r = _EVAL(m, np.ones(2), l, np.zeros(2))
    assert abs(float(r.equilibrium_residual[0])) < TOL_RESIDUAL  # in range: an equilibrium
    np.testing.assert_allclose(r.tendon_force[1], 5.0 * F, rtol=1e-9)
    assert float(r.equilibrium_residual[1]) > 5.0 * F
    assert np.all(np.isfinite(np.asarray(r.fiber_force_along_tendon)))


def _richardson(f, x, h):
    """Central differences with Richardson extrapolation: error O(h^4)."""
    d = lambda h: (f(x + h) - f(x - h)) / (2 * h)
    return (4 * d(h / 2) - d(h)) / 3


@pytest.mark.parametrize("name", list(MODELS))
def test_gradient_matches_finite_differences(name):
    m = MODELS[name]
    a0 = 0.6
    l0 = P["tendon_slack_length"] + 1.05 * P["optimal_fiber_length"]
    for v0 in (0.0, 0.1):
        gm, ga = _GRAD(m, a0, l0, v0)
        fd_a = _richardson(lambda a: _TENDON(m, a, l0, v0), a0, 1e-3)
        assert abs(ga - fd_a) < TOL_FD * abs(fd_a), (ga, fd_a)
        for field in ("max_isometric_force", "tendon_slack_length", "optimal_fiber_length"):
            x = getattr(m, field)
            fd = _richardson(lambda y: _TENDON(eqx.tree_at(lambda mm: getattr(mm, field), m, y), a0, l0, v0),
                             x, 1e-3 * float(x))
            assert abs(getattr(gm, field) - fd) < TOL_FD * max(abs(fd), 1.0), (field, getattr(gm, field), fd)


@pytest.mark.parametrize("name", list(MODELS))
def test_gradient_free_of_nan_at_zero_activation_and_full_stretch(name):
    m = MODELS[name]
    for l0 in (P["tendon_slack_length"] + 1.8 * P["optimal_fiber_length"], P["tendon_slack_length"] * 0.9):
        gm, ga = _GRAD(m, 0.0, l0, 0.0)
        for leaf in jax.tree_util.tree_leaves((gm, ga)):
            assert np.all(np.isfinite(leaf))


def test_float32_evaluation():
    m = jax.tree_util.tree_map(lambda x: x.astype(jnp.float32), MODELS["degroote_compliant"])
    r = m(jnp.float32(0.5), jnp.float32(P["tendon_slack_length"] + P["optimal_fiber_length"]), jnp.float32(0.0))
    assert r.tendon_force.dtype == jnp.float32
    assert abs(float(r.equilibrium_residual)) < 1e-3 * P["max_isometric_force"]


# ----------------------------------------------------------------------------------------------
# OpenSim 4.6 parity
# ----------------------------------------------------------------------------------------------
TOL_PARITY = {  # relative to max(|OpenSim|, 1 N or 1 m)
    "DeGrooteFregly2016Muscle/rigid": 1e-12,  # the same closed forms
    "DeGrooteFregly2016Muscle/compliant": 1e-8,  # OpenSim bisects to 1e-10 in normalised tendon force
    "Thelen2003Muscle/compliant": 1e-6,  # OpenSim's equilibrium tolerance is 1e-8 F_max (8e-6 N)
}


@pytest.mark.parametrize("key", sorted(TOL_PARITY))
def test_opensim_parity(key):
    kind, tendon = key.split("/")
    ref = {k: np.asarray(v).ravel() for k, v in REF["models"][key].items()}
    a, _, v = (x.ravel() for x in np.meshgrid(REF["activations"], REF["muscle_lengths"], REF["speeds"], indexing="ij"))
    r = _EVAL(MODELS[f"{'thelen' if 'Thelen' in kind else 'degroote'}_{tendon}"], a, ref["muscle_length"], v)
    mask = np.ones_like(a, dtype=bool)
    if kind == "Thelen2003Muscle":
        # OpenSim's Thelen equilibrium shares v_MT between fibre and tendon by a heuristic it iterates
        # (initMuscleState); at v_MT = 0 both are the static equilibrium.
        mask = v == 0.0
    if key == "DeGrooteFregly2016Muscle/compliant":
        mask = a > 0.0  # at a = 0 OpenSim's explicit form divides by a f_L (its fibre velocity is inf)
    for field in ("fiber_length", "pennation_angle", "fiber_velocity", "active_fiber_force", "passive_fiber_force",
                  "tendon_force"):
        o, j = ref[field][mask], np.asarray(getattr(r, field))[mask]
        scale = np.maximum(np.abs(o), 1.0)
        tol = TOL_PARITY[key] if field != "fiber_velocity" else max(TOL_PARITY[key], 1e-7)
        assert np.max(np.abs(o - j) / scale) < tol, (field, np.max(np.abs(o - j) / scale))
    if kind == "Thelen2003Muscle":  # away from v_MT = 0: the fibre length within 1e-4 where the tendon is taut
        taut = (ref["tendon_force"] > 1e-3) & (v != 0.0)
        err = np.abs(ref["fiber_length"][taut] - np.asarray(r.fiber_length)[taut]) / ref["fiber_length"][taut]
        assert err.max() < 3e-4


def test_opensim_parity_thelen_rigid_tendon():
    """OpenSim's calcInextensibleTendonActiveFiberForce (what its static optimization uses)."""
    ref = {k: np.asarray(v).ravel() for k, v in REF["models"]["Thelen2003Muscle/rigid"].items()}
    a, _, v = (x.ravel() for x in np.meshgrid(REF["activations"], REF["muscle_lengths"], REF["speeds"], indexing="ij"))
    r = _EVAL(MODELS["thelen_rigid"], a, ref["muscle_length"], v)
    along = np.asarray(r.active_fiber_force * jnp.cos(r.pennation_angle))
    np.testing.assert_allclose(along, ref["active_along_tendon_rigid"], rtol=1e-9, atol=1e-9)


# ----------------------------------------------------------------------------------------------
# activation dynamics
# ----------------------------------------------------------------------------------------------
def test_activation_dynamics():
    th = mb.FirstOrderActivation()
    assert abs(th(1.0, 0.5) - 0.5 / (0.015 * 1.25)) < TOL_EXACT
    assert abs(th(0.0, 0.5) - (-0.5 * 1.25 / 0.05)) < TOL_EXACT
    assert abs(th(0.0, 0.0) - (-0.01 * 0.515 / 0.05)) < TOL_EXACT  # activation clamped to 0.01
    dg = mb.DeGrooteActivation(deactivation_time_constant=0.05, smoothing=1e6)  # steep: Thelen's switch
    for u, a in [(1.0, 0.5), (0.0, 0.5), (0.3, 0.7)]:
        assert abs(dg(u, a) - th(u, a)) < 1e-9
    g = jax.grad(lambda a: mb.DeGrooteActivation()(0.5, a))(0.5)
    assert np.isfinite(g)


# ----------------------------------------------------------------------------------------------
# all muscles of a model at once; import from .osim
# ----------------------------------------------------------------------------------------------
def _slider_model():
    b = mb.ModelBuilder("slider")
    c = b.add_coordinate("x", range=(0.0, 1.0))
    b.add_body(mb.Body("s", 1.0, (0, 0, 0), jnp.eye(3) * 0.01))
    b.add_joint(mb.prismatic("sl", "ground", "s", (1, 0, 0), mb.Coordinate(c)))
    pts = [mb.PathPoint("ground", (0.0, 0.0, 0.0)), mb.PathPoint("s", (0.0, 0.0, 0.0))]
    # two classes, interleaved: muscle_forces groups them and puts the forces back in order
    for name in ("degroote_compliant", "thelen_rigid"):
        b.muscles.append(mb.Muscle(name, pts, force_model=MODELS[name]))
    b.muscles.append(mb.Muscle("extra", pts, force_model=mb.DeGrooteFregly2016Muscle(500.0, 0.1, 0.2)))
    return b.build()


def test_muscle_forces_equal_each_model():
    model = _slider_model()
    n = len(model.muscles)
    a = jnp.linspace(0.1, 0.9, n)
    l = jnp.full(n, P["tendon_slack_length"] + P["optimal_fiber_length"])
    v = jnp.linspace(-0.1, 0.1, n)
    f = jax.jit(lambda a, l, v: mb.muscle_forces(model, a, l, v))(a, l, v)
    each = [_TENDON(m.force_model, float(a[i]), float(l[i]), float(v[i])) for i, m in enumerate(model.muscles)]
    np.testing.assert_allclose(f, each, rtol=1e-12)
    with pytest.raises(ValueError, match=r"activations must have shape \(3,\)"):
        mb.muscle_forces(model, a[:2], l, v)
    bare = eqx.tree_at(lambda m: m.muscles[0].force_model, model, None)
    with pytest.raises(mb.ModelError, match="'degroote_compliant'.*has no force model"):
        mb.muscle_forces(bare, a, l, v)


def test_activations_outside_the_unit_interval_and_lengths_not_positive_are_named():
    """Before: De Groote's force doubled at a = 2, Thelen and Millard clamped silently, and a
    negative length (a fitted path far from its samples) gave a pushing muscle."""
    model = _slider_model()
    n = len(model.muscles)
    a, l, v = jnp.full(n, 0.5), jnp.full(n, P["tendon_slack_length"] + P["optimal_fiber_length"]), jnp.zeros(n)
    with pytest.raises(ValueError, match=r"muscle_forces: activations must be in \[0, 1\], got \[2.0\] for the "
                                         r"muscles \['" + model.muscle_names[1]):
        mb.muscle_forces(model, a.at[1].set(2.0), l, v)
    with pytest.raises(ValueError, match=r"muscle_states: lengths must be positive, got \[-0.3\]"):
        mb.muscle_states(model, a, l.at[0].set(-0.3), v)
    with pytest.raises(ValueError, match=r"activation_rates: excitations must be in \[0, 1\]"):
        mb.activation_rates(model, a.at[2].set(-0.1), a)
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"muscle_forces: activations must be in \[0, 1\]"):
        jax.block_until_ready(eqx.filter_jit(lambda x: mb.muscle_forces(model, x, l, v))(a.at[0].set(1.5)))
    # The ends are in the domain, and so are central differences' steps across them (an optimizer's
    # constraint Jacobian at a bound; the SLSQP check of test_static_optimization_compliant.py).
    assert np.all(np.isfinite(np.asarray(mb.muscle_forces(model, jnp.array([0.0, 1.0, 1.0]), l, v))))
    assert np.all(np.isfinite(np.asarray(mb.muscle_forces(model, jnp.array([-1e-7, 1.0 + 1e-7, 0.5]), l, v))))


def test_non_finite_muscle_inputs_are_named_not_turned_into_forces():
    """Before: a NaN activation came out as a plausible tendon force (the models' clamps and
    equilibrium solves dropped it), a NaN length as 0 N."""
    model = _slider_model()
    n = len(model.muscles)
    a, l, v = jnp.full(n, 0.5), jnp.full(n, P["tendon_slack_length"] + P["optimal_fiber_length"]), jnp.zeros(n)
    with pytest.raises(ValueError, match=r"muscle_forces: activations must be finite, got NaN or inf at muscles "
                                         r"\['" + model.muscle_names[1]):
        mb.muscle_forces(model, a.at[1].set(jnp.nan), l, v)
    with pytest.raises(ValueError, match="muscle_states: lengths must be finite"):
        mb.muscle_states(model, a, l.at[0].set(jnp.inf), v)
    with pytest.raises(ValueError, match="activation_rates: excitations must be finite"):
        mb.activation_rates(model, a.at[2].set(jnp.nan), a)
    with pytest.raises(eqx.EquinoxRuntimeError, match="muscle_forces: lengthening_speeds must be finite"):
        jax.block_until_ready(eqx.filter_jit(lambda v: mb.muscle_forces(model, a, l, v))(v.at[0].set(jnp.nan)))


@pytest.mark.parametrize("kind", [mb.Thelen2003Muscle, mb.Millard2012EquilibriumMuscle, mb.DeGrooteFregly2016Muscle])
def test_a_force_model_called_directly_names_inputs_outside_its_domain(kind):
    """Before: a NaN length gave a plausible force (Thelen, compliant tendon: the
    equilibrium's bracket clamps it), an activation of 2 a force doubled or clamped."""
    fm = kind(**P, compliant_tendon=True)
    l = P["tendon_slack_length"] + P["optimal_fiber_length"]
    assert np.isfinite(float(fm.tendon_force(0.5, l, 0.0)))
    for args, message in [((0.5, jnp.nan, 0.0), "length must be positive"),
                          ((2.0, l, 0.0), r"activation must be in \[0, 1\], got 2.0"),
                          ((jnp.nan, l, 0.0), r"activation must be in \[0, 1\], got nan"),
                          ((0.5, l, jnp.inf), "lengthening_speed must be finite")]:
        with pytest.raises(ValueError, match=f"{kind.__name__}: {message}"):
            fm(*args)
        with pytest.raises(ValueError, match=f"{kind.__name__}: {message}"):
            fm.inextensible_tendon_state(*args)
    with pytest.raises(ValueError, match=f"{kind.__name__}: length must be positive"):
        fm.tendon_force(0.5, -0.1, 0.0)


@pytest.mark.parametrize("make, message", [
    (lambda: mb.Thelen2003Muscle(pennation_angle_at_optimal=2.0), r"pennation_angle_at_optimal must be in \[0, 1.5708\)"),
    (lambda: mb.DeGrooteFregly2016Muscle(pennation_angle_at_optimal=float("nan")), "pennation_angle_at_optimal"),
    (lambda: mb.Thelen2003Muscle(minimum_activation=-0.1), r"minimum_activation must be in \[0, 1\), got -0.1"),
    (lambda: mb.Thelen2003Muscle(maximum_pennation_angle=2.0), r"maximum_pennation_angle must be in \[0, 1.5708\]"),
    (lambda: mb.FirstOrderActivation(activation_time_constant=-0.01),
     "FirstOrderActivation: activation_time_constant must be positive"),
    (lambda: mb.FirstOrderActivation(minimum_activation=1.0), r"FirstOrderActivation: minimum_activation must be in"),
    (lambda: mb.DeGrooteActivation(smoothing=0.0), "DeGrooteActivation: smoothing must be positive"),
])
def test_muscle_parameters_outside_their_domain_are_named(make, message):
    """Before: accepted (a pennation of 2 rad, a negative time constant, NaN), and forces or
    activation rates came out wrong or NaN."""
    with pytest.raises(mb.ModelError, match=message):
        make()


_TEMPLATE = (DATA / "broken_osim" / "path_point_nan_location.osim").read_text().replace("nan 0.1 0", "0.1 0.1 0")


def _write(tmp_path, text, name="m.osim"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_import_builds_the_force_model(tmp_path):
    text = _TEMPLATE.replace("<tendon_slack_length>0.2</tendon_slack_length>",
                             "<tendon_slack_length>0.2</tendon_slack_length><FmaxTendonStrain>0.05</FmaxTendonStrain>"
                             "<Af>0.3</Af><activation_time_constant>0.02</activation_time_constant>")
    model = mb.load_osim(_write(tmp_path, text))
    fm = model.muscles[0].force_model
    assert isinstance(fm, mb.Thelen2003Muscle) and fm.compliant_tendon
    assert float(fm.tendon_strain_at_one) == 0.05 and float(fm.af) == 0.3 and float(fm.flen) == 1.4
    assert float(fm.max_isometric_force) == 100.0 and float(fm.optimal_fiber_length) == 0.3
    assert float(model.muscles[0].activation_dynamics.activation_time_constant) == 0.02
    dg = text.replace("Thelen2003Muscle", "DeGrooteFregly2016Muscle").replace(
        "<FmaxTendonStrain>0.05</FmaxTendonStrain><Af>0.3</Af>",
        "<ignore_tendon_compliance>true</ignore_tendon_compliance><fiber_damping>0.01</fiber_damping>")
    fm = mb.load_osim(_write(tmp_path, dg, "d.osim")).muscles[0].force_model
    assert isinstance(fm, mb.DeGrooteFregly2016Muscle) and not fm.compliant_tendon
    assert float(fm.fiber_damping) == 0.01


_WRAP_BODY = ("<mass_center>0 -0.5 0</mass_center>", "<mass_center>0 -0.5 0</mass_center><WrapObjectSet><objects>"
              "<WrapSphere name=\"ws\"><radius>-0.02</radius></WrapSphere></objects></WrapObjectSet>")
_WRAP_PATH = ("</PathPointSet>", "</PathPointSet><PathWrapSet><objects><PathWrap name=\"pw\">"
              "<wrap_object>ws</wrap_object></PathWrap></objects></PathWrapSet>")


@pytest.mark.parametrize("edit, match", [
    ([("<max_isometric_force>100<", "<max_isometric_force>-100<")], "max_isometric_force must be positive"),
    ([("<optimal_fiber_length>0.3<", "<optimal_fiber_length>0<")], "optimal_fiber_length must be positive"),
    ([("<tendon_slack_length>0.2<", "<tendon_slack_length>-0.2<")], "tendon_slack_length must be positive"),
    ([_WRAP_BODY, _WRAP_PATH], "radius must be positive"),
    ([("0.1 0.1 0", "inf 0.1 0")], "non-finite"),
])
def test_bad_muscle_parameters_name_the_muscle_and_line(tmp_path, edit, match):
    text = _TEMPLATE
    for old, new in edit:
        assert old in text
        text = text.replace(old, new, 1)
    path = _write(tmp_path, text)
    with pytest.raises(mb.ModelError, match=match) as exc:
        mb.load_osim(path)
    msg = str(exc.value)
    assert "muscle 'flexor'" in msg.lower() and f"{path}:" in msg, msg


def test_a_muscle_built_inside_jit_checks_its_concrete_parameters():
    """Concrete parameters (arrays made outside) of a muscle built under jit are checked with
    NumPy: a jnp comparison there is traced, and the check failed with TracerBoolConversionError."""
    fmax, bad = jnp.asarray(500.0), jnp.asarray(-100.0)
    assert float(jax.jit(lambda: mb.Thelen2003Muscle(max_isometric_force=fmax).max_isometric_force)()) == 500.0
    with pytest.raises(mb.ModelError, match=r"muscle 'Thelen2003Muscle': max_isometric_force must be positive"):
        jax.jit(lambda: mb.Thelen2003Muscle(max_isometric_force=bad).af)()


def test_a_muscle_built_inside_jit_checks_its_control_bounds():
    """The control bounds too are checked in NumPy under jit (jnp raised a tracer error there)."""
    pts = [mb.PathPoint("ground", (0.0, 0.0, 0.0)), mb.PathPoint("s", (0.0, 0.0, 0.0))]
    lo, hi = jnp.asarray(0.5), jnp.asarray(0.2)
    with pytest.raises(mb.ModelError, match=r"Muscle 'm': min_control 0.5 is above max_control 0.2"):
        jax.jit(lambda: mb.Muscle("m", pts, min_control=lo, max_control=hi).min_control)()
    assert float(jax.jit(lambda: mb.Muscle("m", pts, min_control=hi, max_control=lo).max_control)()) == 0.5


def test_a_muscles_parameters_are_its_force_models():
    """Before: a Muscle given parameters that its force model contradicts was built, and
    `jaxmb info` reported parameters that no force used; without parameters it reported
    MuscleParameters' defaults (1000 N) whatever the force model said."""
    pts = [mb.PathPoint("ground", (0.0, 0.0, 0.0)), mb.PathPoint("s", (0.0, 0.0, 0.0))]
    fm = mb.DeGrooteFregly2016Muscle(500.0, 0.1, 0.2)
    derived = mb.Muscle("m", pts, force_model=fm).parameters
    assert (float(derived.max_isometric_force), float(derived.optimal_fiber_length),
            float(derived.tendon_slack_length)) == (500.0, 0.1, 0.2)
    same = mb.MuscleParameters(500.0, 0.1, 0.2, 0.0, float(fm.max_contraction_velocity))
    assert mb.Muscle("m", pts, parameters=same, force_model=fm).parameters is same
    with pytest.raises(mb.ModelError, match=r"Muscle 'm': parameters.max_isometric_force = 1000 differs from its "
                                            r"DeGrooteFregly2016Muscle's 500"):
        mb.Muscle("m", pts, parameters=mb.MuscleParameters(1000.0, 0.1, 0.2), force_model=fm)


@pytest.mark.parametrize("make", [mb.Thelen2003Muscle, mb.Millard2012EquilibriumMuscle, mb.DeGrooteFregly2016Muscle])
def test_every_model_refuses_a_pennation_within_significant_real_of_a_right_angle(make):
    """OpenSim's pennation models refuse an angle beyond pi/2 - SignificantReal (1.5e-8 rad):
    one check, shared by every model, with one message (Millard's had a second, with its own
    wording, for the last 1.5e-8 rad)."""
    with pytest.raises(mb.ModelError, match=r"pennation_angle_at_optimal must be in \[0, 1.5708\), got 1.57079"):
        make(pennation_angle_at_optimal=np.pi / 2 - 1e-9)
    assert float(make(pennation_angle_at_optimal=np.pi / 2 - 1e-6).pennation_angle_at_optimal) > 1.5707


@pytest.mark.parametrize("kw, message", [
    ({"active_width_scale": 0.5}, r"active_width_scale must be in \[1, inf\], got 0.5"),
    ({"fiber_damping": -0.1}, r"fiber_damping must be in \[0, inf\], got -0.1"),
    ({"fiber_damping": float("nan")}, r"fiber_damping must be in \[0, inf\], got nan"),
])
def test_de_groote_refuses_a_narrow_width_scale_and_negative_damping(kw, message):
    with pytest.raises(mb.ModelError, match=r"muscle 'DeGrooteFregly2016Muscle': " + message):
        mb.DeGrooteFregly2016Muscle(**kw)


@pytest.mark.parametrize("flen", [1.0, 0.5, float("nan")])
def test_thelen_refuses_an_eccentric_plateau_not_above_one(flen):
    """Thelen 2003's force-velocity curve divides by Flen - 1 (its eccentric plateau above the
    isometric force), so Flen <= 1 or NaN is refused, as OpenSim does; under jit too, where
    the number would otherwise be a tracer and the check skipped."""
    message = r"muscle 'Thelen2003Muscle': Flen must be greater than 1, got "
    with pytest.raises(mb.ModelError, match=message):
        mb.Thelen2003Muscle(flen=flen)
    with pytest.raises(mb.ModelError, match=message):
        jax.jit(lambda: mb.Thelen2003Muscle(flen=flen).flen)()
    assert float(jax.jit(lambda: mb.Thelen2003Muscle(flen=1.4).flen)()) == 1.4
