"""The .osim importer's skeleton: parity with OpenSim 4.6 and clear errors.

Oracles:

* ``tests/data/opensim/*.npz`` (OpenSim 4.6, see its README.md): body poses at every
  sweep point to 1e-9 m (and 1e-9 in the rotation entries), every coordinate's value
  (couplers) to 1e-12, mass matrix and inverse dynamics reduced to the independent
  coordinates to 1e-8 relative (to the largest entry) at 20 random states.
* Small hand-written models: each OpenSim joint type against the equivalent
  CustomJoint, couplers and locked coordinates against explicit joint functions.
* ``tests/data/broken_osim/``: every malformed/unsupported file raises ModelError
  naming the element (tag, name and file:line).
"""

from __future__ import annotations

import hashlib
import pathlib
import re
import time
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.test_util import check_grads
import numpy as np
import pytest

import jaxmb as mb
from jaxmb.io import read_osim
from jaxmb._functions import fmm_spline_coefficients  # private: the importer's NumPy spline fit, checked alone
from jaxmb.io import parse_function

import xml.etree.ElementTree as ET

HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE.parent / "jaxmb" / "data"
REFERENCE = HERE / "data" / "opensim"
BROKEN = HERE / "data" / "broken_osim"

# Both sides are the same exact maths in float64: measured 2e-15 (poses), 1.3e-14 (M of gait2354).
POSE_TOL = 1e-13  # m (and the dimensionless rotation entries)
DYN_RTOL = 1e-12  # relative to the largest entry of the OpenSim quantity
# Fast XLA compilation: these graphs are large (MoBL-ARMS: 20 bodies, 38 joints)
# and are run only 20 times, so optimisation passes cost more than they save.
FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}

MODELS = {  # reference file -> (where the .osim lives, file name)
    "arm26": ("data", "arm26.osim"),
    "gait2354": ("data", "gait2354_simbody.osim"),
    "mobl_arms": ("shared", "MOBL_ARMS_fixed_41.osim"),
}


def _model_path(key, shared_dir) -> pathlib.Path:
    where, name = MODELS[key]
    path = (DATA if where == "data" else shared_dir / "models") / name
    if not path.exists():
        pytest.skip(f"{path} is not available")
    return path


@pytest.fixture(scope="module")
def loaded(shared_dir):
    """key -> (OsimImport, reference npz or None); each model is read once."""
    cache = {}

    def get(key):
        if key not in cache:
            path = _model_path(key, shared_dir)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # MoBL's impossible inertias are reported, not errors
                t0 = time.perf_counter()
                imp = read_osim(path, muscles=False)
                load_s = time.perf_counter() - t0
            ref_path = REFERENCE / f"{key}.npz"
            ref = None
            if ref_path.exists():
                ref = dict(np.load(ref_path))
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                assert str(ref["model_sha256"]) == digest, f"{ref_path} was made from another {path.name}"
            cache[key] = (imp, ref, load_s)
        return cache[key]

    return get


def _need_ref(ref, key):
    if ref is None:
        pytest.skip(f"no OpenSim reference data tests/data/opensim/{key}.npz")
    return ref


# ---------------------------------------------------------------------------
# Parity with OpenSim
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("key", list(MODELS))
def test_coordinates_bodies_and_metadata(loaded, key):
    imp, ref, load_s = loaded(key)
    model = imp.model
    assert load_s < 10.0
    ref = _need_ref(ref, key)
    assert model.coordinate_names == tuple(ref["independent_coordinate_names"])
    assert imp.all_coordinate_names == tuple(ref["coordinate_names"])
    kinds = np.array([c.kind for c in imp.coordinates])
    np.testing.assert_array_equal(kinds == "dependent", ref["coordinate_dependent"])
    np.testing.assert_array_equal(kinds == "locked", ref["coordinate_locked"])
    assert set(ref["body_names"]) <= set(model.body_names)
    ind = ref["independent_coordinate_indices"]
    np.testing.assert_array_equal(np.asarray(model.q_default), ref["coordinate_defaults"][ind])
    np.testing.assert_array_equal(np.asarray(model.q_lower), ref["coordinate_ranges"][ind, 0])
    np.testing.assert_array_equal(np.asarray(model.q_upper), ref["coordinate_ranges"][ind, 1])
    np.testing.assert_allclose(np.asarray(model.gravity), ref["gravity"], rtol=0, atol=1e-15)
    assert set(imp.coordinate_functions) == set(ref["coordinate_names"])


@pytest.mark.parametrize("key", list(MODELS))
def test_body_poses_and_coordinates_along_sweeps(loaded, key):
    imp, ref, _ = loaded(key)
    ref = _need_ref(ref, key)
    model = imp.model
    rows = jnp.asarray([model.body_index(b) for b in ref["body_names"]])

    @jax.vmap
    def poses_and_q(q):
        return mb.body_transforms(model, q)[rows], imp.full_coordinates(q)

    def run(q):  # one compilation per batch shape, without the slow optimisation passes
        return jax.jit(poses_and_q).lower(q).compile(compiler_options=FAST_COMPILE)(q)

    poses, q_full = run(jnp.asarray(ref["sweep_q_ind"]))
    err = np.abs(np.asarray(poses) - ref["sweep_body_poses"])
    q_err = np.abs(np.asarray(q_full) - ref["sweep_q_full"]).max()
    print(f"\n[osim parity] {key}: {len(err)} sweep points, max |pose - OpenSim| "
          f"{err.max():.1e} (positions {err[..., :3, 3].max():.1e} m), max |q_full - OpenSim| {q_err:.1e}")
    assert err.max() < POSE_TOL, f"{key}: worst pose error {err.max():.2e}"
    assert q_err < 1e-14
    poses, _ = run(jnp.asarray(ref["random_q_ind"]))
    assert np.abs(np.asarray(poses) - ref["random_body_poses"]).max() < POSE_TOL


@pytest.mark.parametrize("key", list(MODELS))
def test_mass_matrix_and_inverse_dynamics_at_random_states(loaded, key):
    imp, ref, _ = loaded(key)
    ref = _need_ref(ref, key)
    model = imp.model

    def dynamics(q, qd, qdd):
        return mb.mass_matrix(model, q), mb.inverse_dynamics(model, q, qd, qdd)

    q0 = jnp.asarray(ref["random_q_ind"][0])
    t0 = time.perf_counter()
    compiled = jax.jit(dynamics).lower(q0, q0, q0).compile(compiler_options=FAST_COMPILE)
    compile_s = time.perf_counter() - t0
    zero = np.zeros_like(ref["random_qd_ind"][0])
    out = {"M": [], "tau": [], "bias": [], "G": []}
    for q, qd, qdd in zip(ref["random_q_ind"], ref["random_qd_ind"], ref["random_qdd_ind"]):
        m_q, tau = compiled(q, qd, qdd)
        out["M"].append(m_q)
        out["tau"].append(tau)
        out["bias"].append(compiled(q, qd, zero)[1])
        out["G"].append(-compiled(q, zero, zero)[1])
    for name, ref_key in (("M", "random_mass_matrix_ind"), ("tau", "random_tau_random_acc_ind"),
                          ("bias", "random_tau_zero_acc_ind"), ("G", "random_gravity_forces_ind")):
        got = np.asarray(out[name])
        want = ref[ref_key]
        rel = np.abs(got - want).max() / np.abs(want).max()
        print(f"\n[osim parity] {key}: {name} max relative error {rel:.1e} over 20 states "
              f"(compile {compile_s:.1f} s)", end="")
        assert rel < DYN_RTOL, f"{key} {name}: relative error {rel:.2e} (compile {compile_s:.1f} s)"


def test_arm26_with_muscles_loads():
    """``load_osim`` hands the ForceSet to the muscle parser when it exists."""
    pytest.importorskip("jaxmb.io._osim_forces")
    model = mb.load_osim(DATA / "arm26.osim")
    ref = np.load(REFERENCE / "arm26.npz") if (REFERENCE / "arm26.npz").exists() else None
    if ref is not None:
        assert model.muscle_names == tuple(ref["muscle_names"])


def test_a_model_without_mass_loads_as_a_kinematic_model(tmp_path):
    """A model in which no body has mass (as OpenSim's wrist model, Gonzalez et al. 1997,
    built for moment arms) loads with a note saying so; its muscle paths are arm26's
    (mass does not enter them), and the calls that need M(q)⁻¹ refuse it by name."""
    text = re.sub(r"<mass>[^<]*</mass>", "<mass>0</mass>", (DATA / "arm26.osim").read_text())
    text = re.sub(r"<inertia>[^<]*</inertia>", "<inertia>0 0 0 0 0 0</inertia>", text)
    path = tmp_path / "arm26_massless.osim"
    path.write_text(text)
    with pytest.warns(UserWarning, match=r"arm26_massless.osim:\d+: no body has mass: a kinematic model"):
        kinematic = mb.load_osim(path)
    model = mb.load_osim(DATA / "arm26.osim")
    assert kinematic.muscle_names == model.muscle_names
    # The muscle without wraps (a small program; the wraps read no mass either).
    plain = [m.name for m in model.muscles if not m.wraps]
    qs = jnp.array([[0.1, 0.5], [-0.4, 1.9], [1.2, 0.05]])
    lengths = jax.jit(jax.vmap(lambda m, q: mb.muscle_lengths(m, q), in_axes=(None, 0)))
    a, b = (lengths(eqx.tree_at(lambda x: x.muscles, m, tuple(u for u in m.muscles if u.name in plain)), qs)
            for m in (kinematic, model))
    assert plain == ["BICshort"] and a.shape == (3, 1)
    np.testing.assert_array_equal(a, b)
    assert float(jnp.abs(mb.mass_matrix(kinematic, qs[0])).max()) == 0.0
    with pytest.raises(mb.ModelError, match="forward_dynamics: no body of Model 'arm26' has mass"):
        mb.forward_dynamics(kinematic, qs[0], jnp.zeros(2))


# ---------------------------------------------------------------------------
# Small hand-written models: joint types, couplers, locked coordinates
# ---------------------------------------------------------------------------

_BODY = """<Body name="{n}"><mass>{m}</mass><mass_center>0.01 -0.2 0.03</mass_center>
<inertia>0.04 0.02 0.05 0.001 -0.002 0.003</inertia></Body>"""


def _frame(name, parent, t="0 0 0", o="0 0 0"):
    return (f'<PhysicalOffsetFrame name="{name}"><socket_parent>{parent}</socket_parent>'
            f"<translation>{t}</translation><orientation>{o}</orientation></PhysicalOffsetFrame>")


def _coords(names, locked=(), defaults=None):
    defaults = defaults or {}
    return "".join(
        f'<Coordinate name="{c}"><default_value>{defaults.get(c, 0.1)}</default_value>'
        f"<range>-2 2</range><locked>{'true' if c in locked else 'false'}</locked></Coordinate>"
        for c in names)


def _axis(label, coords, axis, fn=None):
    if fn is None:
        fn = ("<LinearFunction><coefficients>1 0</coefficients></LinearFunction>" if coords
              else "<Constant><value>0</value></Constant>")
    return (f'<TransformAxis name="{label}"><coordinates>{coords}</coordinates><axis>{axis}</axis>'
            f"{fn}</TransformAxis>")


def _joint(tag, coords, inner="", locked=(), defaults=None):
    return (f'<{tag} name="j"><socket_parent_frame>p</socket_parent_frame>'
            f"<socket_child_frame>c</socket_child_frame><coordinates>{_coords(coords, locked, defaults)}"
            f"</coordinates><frames>{_frame('p', '/bodyset/base', '0.1 0.2 -0.3', '0.3 -0.2 0.5')}"
            f"{_frame('c', '/bodyset/arm', '0.02 0.1 0.05', '-0.1 0.4 0.2')}</frames>{inner}</{tag}>")


def _document(joint, constraints=""):
    base = ('<WeldJoint name="anchor"><socket_parent_frame>/ground</socket_parent_frame>'
            "<socket_child_frame>/bodyset/base</socket_child_frame></WeldJoint>")
    return f"""<?xml version="1.0"?>
<OpenSimDocument Version="40000"><Model name="t"><Ground name="ground"/>
<gravity>0 -9.81 0</gravity>
<BodySet><objects>{_BODY.format(n='base', m=2.0)}{_BODY.format(n='arm', m=1.5)}</objects></BodySet>
<JointSet><objects>{base}{joint}</objects></JointSet>
<ConstraintSet><objects>{constraints}</objects></ConstraintSet>
</Model></OpenSimDocument>
"""


def _load(tmp_path, text, name="m.osim"):
    path = tmp_path / name
    path.write_text(text)
    return read_osim(path)


def _spatial(r, t):
    labels = [f"rotation{k}" for k in (1, 2, 3)] + [f"translation{k}" for k in (1, 2, 3)]
    return "<SpatialTransform>" + "".join(_axis(lab, c, a) for lab, (c, a) in zip(labels, r + t)) + \
        "</SpatialTransform>"


X, Y, Z = "1 0 0", "0 1 0", "0 0 1"
NONE3 = [("", X), ("", Y), ("", Z)]

# Each joint type and the CustomJoint that OpenSim/Simbody defines it to be.
EQUIVALENT = {
    "PinJoint": (["a"], [("a", Z), ("", X), ("", Y)], NONE3),
    "SliderJoint": (["a"], [("", X), ("", Y), ("", Z)], [("a", X), ("", Y), ("", Z)]),
    "UniversalJoint": (["a", "b"], [("a", X), ("b", Y), ("", Z)], NONE3),
    "BallJoint": (["a", "b", "c"], [("a", X), ("b", Y), ("c", Z)], NONE3),
    "GimbalJoint": (["a", "b", "c"], [("a", X), ("b", Y), ("c", Z)], NONE3),
    "FreeJoint": (["a", "b", "c", "d", "e", "f"], [("a", X), ("b", Y), ("c", Z)],
                  [("d", X), ("e", Y), ("f", Z)]),
    "PlanarJoint": (["a", "b", "c"], [("a", Z), ("", X), ("", Y)], [("b", X), ("c", Y), ("", Z)]),
}


@pytest.mark.parametrize("tag", list(EQUIVALENT))
def test_joint_types_match_their_custom_joint(tmp_path, tag):
    coords, rot, trans = EQUIVALENT[tag]
    direct = _load(tmp_path, _document(_joint(tag, coords)), "direct.osim").model
    custom = _load(tmp_path, _document(_joint("CustomJoint", coords, _spatial(rot, trans))),
                   "custom.osim").model
    assert direct.coordinate_names == custom.coordinate_names == tuple(coords)
    q = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, len(coords)))
    np.testing.assert_allclose(mb.body_transforms(direct, q)[direct.body_index("arm")],
                               mb.body_transforms(custom, q)[custom.body_index("arm")], atol=1e-14)


def _pose(rotations, p):
    """X_PF · [R1 R2 R3, p] · X_CM⁻¹ for the frames of :func:`_joint`, by hand."""
    from jaxmb._spatial import body_fixed_xyz, homogeneous, rotation_about_axis  # private math (no public API)

    r = jnp.eye(3)
    for axis, angle in rotations:
        axis = jnp.asarray(axis, float)
        r = r @ rotation_about_axis(axis / jnp.linalg.norm(axis), angle)
    x_pf = homogeneous(body_fixed_xyz(jnp.array([0.3, -0.2, 0.5])), jnp.array([0.1, 0.2, -0.3]))
    x_cm = homogeneous(body_fixed_xyz(jnp.array([-0.1, 0.4, 0.2])), jnp.array([0.02, 0.1, 0.05]))
    return x_pf @ homogeneous(r, jnp.asarray(p, float)) @ jnp.linalg.inv(x_cm)


def test_custom_joint_semantics_by_hand(tmp_path):
    """X_G,arm = X_PF · Trans(p) · R1 R2 R3 · X_CM⁻¹ with body-fixed rotations."""
    rot = [("a", "0.6 0.8 0"), ("b", X), ("c", "0 0.6 0.8")]
    trans = [("d", "0 0 2"), ("", Y), ("e", "1 1 0")]
    imp = _load(tmp_path, _document(_joint("CustomJoint", list("abcde"), _spatial(rot, trans))))
    q = np.array([0.3, -0.7, 1.1, 0.25, -0.4])
    p = q[3] * jnp.array([0, 0, 1.0]) + q[4] * jnp.array([1.0, 1.0, 0]) / np.sqrt(2)
    expected = _pose([([0.6, 0.8, 0], q[0]), ([1.0, 0, 0], q[1]), ([0, 0.6, 0.8], q[2])], p)
    got = mb.body_transforms(imp.model, jnp.asarray(q))[imp.model.body_index("arm")]
    np.testing.assert_allclose(got, expected, atol=1e-14)
    # Body inertia with products: [Ixx Iyy Izz Ixy Ixz Iyz] about the centre of mass.
    arm = imp.model.bodies[imp.model.body_index("arm")]
    np.testing.assert_array_equal(arm.inertia, [[0.04, 0.001, -0.002], [0.001, 0.02, 0.003],
                                                [-0.002, 0.003, 0.05]])
    np.testing.assert_array_equal(arm.com, [0.01, -0.2, 0.03])


def test_coupler_and_locked_coordinates_are_eliminated(tmp_path):
    spline = "<SimmSpline><x>-2 -1 0 1.5 2</x><y>0.3 -0.2 0.1 0.4 0.2</y></SimmSpline>"
    rot = [("a", Z), ("b", X), ("c", Y)]
    coupler = f"""<CoordinateCouplerConstraint name="couple"><isEnforced>true</isEnforced>
    <coupled_coordinates_function>{spline}</coupled_coordinates_function>
    <independent_coordinate_names>a</independent_coordinate_names>
    <dependent_coordinate_name>c</dependent_coordinate_name><scale_factor>1.5</scale_factor>
    </CoordinateCouplerConstraint>"""
    joint = _joint("CustomJoint", ["a", "b", "c"], _spatial(rot, NONE3), locked=("b",), defaults={"b": 0.7})
    imp = _load(tmp_path, _document(joint, coupler))
    assert imp.model.coordinate_names == ("a",)
    assert imp.names_of("locked") == ("b",) and imp.names_of("dependent") == ("c",)
    x, y = np.array([-2, -1, 0, 1.5, 2.0]), np.array([0.3, -0.2, 0.1, 0.4, 0.2])
    oracle = mb.CubicSpline.fit(0, x, y, end_condition="not-a-knot-fmm")
    for a in (-2.5, -1.3, 0.0, 0.9, 1.99, 2.7):  # inside and outside the knots
        q = jnp.array([a])
        c = 1.5 * oracle(q)
        np.testing.assert_allclose(imp.full_coordinates(q), [a, 0.7, c], atol=1e-14)
        expected = _pose([([0, 0, 1.0], a), ([1.0, 0, 0], 0.7), ([0, 1.0, 0], c)], jnp.zeros(3))
        got = mb.body_transforms(imp.model, q)[imp.model.body_index("arm")]
        np.testing.assert_allclose(got, expected, atol=1e-14)
    q = jnp.array([0.4])
    g = jax.grad(lambda q: imp.full_coordinates(q)[2])(q)
    np.testing.assert_allclose(g, jax.grad(lambda q: 1.5 * oracle(q))(q), atol=1e-14)
    assert imp.model.q_default.shape == (1,)


# ---------------------------------------------------------------------------
# Functions
# ---------------------------------------------------------------------------


def _fn(xml, inner=None):
    return parse_function(ET.fromstring(xml), inner or mb.Coordinate(0))


@pytest.mark.parametrize("n", [2, 3, 4, 7])
def test_simm_spline_is_fmm_with_linear_extrapolation(n):
    rng = np.random.default_rng(n)
    x = np.sort(rng.uniform(-2, 2, n)) + np.arange(n) * 0.1
    y = rng.normal(size=n)
    xs, ys = " ".join(repr(float(v)) for v in x), " ".join(repr(float(v)) for v in y)
    f = _fn(f"<SimmSpline><x>{xs}</x><y>{ys}</y></SimmSpline>")
    g = _fn(f"<NaturalCubicSpline><x>{xs}</x><y>{ys}</y></NaturalCubicSpline>")
    oracle = mb.CubicSpline.fit(0, x, y, end_condition="not-a-knot-fmm")
    b, c, d = fmm_spline_coefficients(x, y)
    np.testing.assert_allclose(b, oracle.b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(c, oracle.c, rtol=1e-12, atol=1e-12)
    t = jnp.asarray(np.concatenate([x, np.linspace(x[0] - 1, x[-1] + 1, 23)]))[:, None]
    np.testing.assert_allclose(jax.vmap(f)(t), jax.vmap(oracle)(t), rtol=1e-12, atol=1e-13)
    np.testing.assert_array_equal(jax.vmap(g)(t), jax.vmap(f)(t))
    # outside the knots: the line with the end slope
    t = x[-1] + 0.5
    np.testing.assert_allclose(f(jnp.array([t])), y[-1] + 0.5 * b[-1], rtol=1e-12)
    np.testing.assert_allclose(jax.grad(lambda q: f(q))(jnp.array([x[0] - 0.3])), [b[0]], rtol=1e-12)


def test_piecewise_linear_constant_polynomial_multiplier():
    plf = _fn("<PiecewiseLinearFunction><x>0 1 3</x><y>0 2 3</y></PiecewiseLinearFunction>")
    for t, v in ((-1, -2.0), (0.5, 1.0), (2, 2.5), (4, 3.5)):  # README: f(-1) = -2, f(4) = 3.5
        np.testing.assert_allclose(plf(jnp.array([float(t)])), v, rtol=1e-15)
    pcf = _fn("<PiecewiseConstantFunction><x>0 1 3</x><y>5 6 7</y></PiecewiseConstantFunction>")
    for t, v in ((-1, 5.0), (0.0, 5.0), (0.5, 5.0), (2, 6.0), (3, 7.0), (9, 7.0)):
        np.testing.assert_allclose(pcf(jnp.array([float(t)])), v)
    assert float(jax.grad(lambda q: pcf(q))(jnp.array([0.5]))[0]) == 0.0
    poly = _fn("<PolynomialFunction><coefficients>2 -1 3</coefficients></PolynomialFunction>")
    np.testing.assert_allclose(poly(jnp.array([1.5])), 2 * 1.5**2 - 1.5 + 3)
    lin = _fn("<LinearFunction><coefficients>-2 0.5</coefficients></LinearFunction>",
              inner=mb.Coordinate(1))
    np.testing.assert_allclose(lin(jnp.array([9.0, 1.5])), -2.5)
    mult = _fn("<MultiplierFunction><function><LinearFunction><coefficients>2 1</coefficients>"
               "</LinearFunction></function><scale>0.5</scale></MultiplierFunction>")
    np.testing.assert_allclose(mult(jnp.array([3.0])), 3.5)
    const = _fn("<Constant><value>0.25</value></Constant>")
    assert float(const(jnp.array([3.0]))) == 0.25
    # a function of a function of q (a coupled coordinate): Composed, with exact gradients
    inner = _fn("<LinearFunction><coefficients>2 1</coefficients></LinearFunction>")
    outer = _fn("<SimmSpline><x>0 1 2 4</x><y>0 1 0 2</y></SimmSpline>", inner=inner)
    assert isinstance(outer, mb.Composed)
    check_grads(jax.jit(lambda q: outer(q)), (jnp.array([0.3]),), order=2, modes=["fwd", "rev"])


def test_gcvspline_without_half_order_is_rejected_by_name():
    # <degree> is not an OpenSim property: OpenSim reads half_order 0 and fails.
    with pytest.raises(mb.ModelError, match="GCVSpline.*half_order"):
        _fn("<GCVSpline><degree>5</degree><x>0 1 2 3 4 5</x><y>0 1 0 1 0 1</y></GCVSpline>")
    with pytest.raises(mb.ModelError, match="at least 6 points"):
        _fn("<GCVSpline><half_order>3</half_order><x>0 1 2 3 4</x><y>0 1 0 1 0</y></GCVSpline>")


# ---------------------------------------------------------------------------
# The broken corpus
# ---------------------------------------------------------------------------

BROKEN_FILES = sorted(p.name for p in BROKEN.glob("*.osim") if not p.name.startswith("valid_"))


def test_broken_corpus_is_large_and_its_baseline_loads():
    assert len(BROKEN_FILES) >= 15
    model = read_osim(BROKEN / "valid_two_link.osim").model
    assert model.coordinate_names == ("q1", "q2")


@pytest.mark.parametrize("name, skipped", [
    ("valid_with_contact.osim", r"contact geometry is not modelled; skipped 1: ContactSphere 'heel'\. Simulations"),
    ("valid_with_controller.osim", r"controllers are not modelled; skipped 1: PrescribedController 'ctrl'\. Apply"),
])
def test_contact_geometry_and_controllers_are_skipped_with_a_warning_naming_them(name, skipped):
    """A floor, foot spheres or a controller do not stop a model from loading for its
    kinematics, muscles and inverse dynamics (which use none of them); the warning names
    each object skipped, and the contact forces are named with the ForceSet's skipped forces."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = mb.load_osim(BROKEN / name)
    messages = [str(w.message) for w in caught]
    assert any(re.search(rf"{name}:\d+: " + skipped, m) for m in messages), messages
    if name == "valid_with_contact.osim":
        assert any("skipped 1: 1 HuntCrossleyForce (heel_floor)" in m for m in messages), messages
    assert model.coordinate_names == ("q1", "q2") and model.forces == ()


@pytest.mark.parametrize("name", BROKEN_FILES)
def test_broken_file_raises_naming_the_element(name):
    path = BROKEN / name
    text = path.read_text()
    expect = re.search(r"<!-- expect: (.+?) -->", text).group(1)
    with pytest.raises(mb.ModelError) as info:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            read_osim(path)
    message = str(info.value)
    assert expect in message, message
    assert isinstance(info.value, ValueError)
    if expect == "not well-formed XML":
        return
    # the message points at a line of the file that opens the named element
    m = re.search(re.escape(str(path)) + r":(\d+)", message)
    assert m, message
    line = text.splitlines()[int(m.group(1)) - 1]
    assert f"<{expect}" in line, (message, line)


# ---------------------------------------------------------------------------
# Non-finite numbers on the muscle side; <ForceSet file="...">
# ---------------------------------------------------------------------------


def test_nan_path_point_location_names_the_point_file_and_line(tmp_path):
    """The muscle-side reader had no finiteness check: this file loaded silently."""
    path = BROKEN / "path_point_nan_location.osim"
    text = path.read_text()
    line = 1 + text.splitlines().index("                  <location>nan 0.1 0</location>")
    with pytest.raises(mb.ModelError) as info:
        read_osim(path)
    assert (f"<location> of <PathPoint name='flexor-P2'> at {path}:{line}: holds a non-finite number "
            "('nan 0.1 0'); write finite numbers") in str(info.value)
    finite = tmp_path / "finite.osim"
    finite.write_text(text.replace("nan 0.1 0", "0.05 -0.3 0"))
    assert mb.load_osim(finite).muscle_names == ("flexor",)


def _arm26_with_forceset_in(folder: pathlib.Path, forces_name: str, forces_text=None) -> pathlib.Path:
    """arm26.osim in `folder` with its ForceSet moved to the file `forces_name` (relative)."""
    text = (DATA / "arm26.osim").read_text()
    start, end = text.index("<ForceSet"), text.index("</ForceSet>") + len("</ForceSet>")
    forces = folder / forces_name
    forces.parent.mkdir(parents=True, exist_ok=True)
    forces.write_text('<?xml version="1.0" encoding="UTF-8" ?>\n<OpenSimDocument Version="40000">\n'
                      + (forces_text or text[start:end]) + "\n</OpenSimDocument>\n")
    model = folder / "model" / "arm26.osim"
    model.parent.mkdir(parents=True, exist_ok=True)
    model.write_text(text[:start] + f'<ForceSet name="forceset" file="../{forces_name}" />' + text[end:])
    return model


def test_forceset_file_is_read_relative_to_the_model(tmp_path):
    """OpenSim reads ``<ForceSet file="...">`` from the named file (relative to the
    model's folder); jaxmb ignored it and loaded the model with no muscles."""
    import equinox as eqx

    inline = mb.load_osim(DATA / "arm26.osim")
    split = mb.load_osim(_arm26_with_forceset_in(tmp_path, "forces/arm26_forces.xml"))
    assert len(inline.muscle_names) == 6
    assert split.muscle_names == inline.muscle_names
    assert eqx.tree_equal(split.muscles, inline.muscles)


def test_errors_inside_an_included_forceset_name_that_file(tmp_path):
    text = (DATA / "arm26.osim").read_text()
    forceset = text[text.index("<ForceSet"):text.index("</ForceSet>") + len("</ForceSet>")]
    first = re.search(r"<location>[^<]*</location>", forceset).group(0)
    bad = forceset.replace(first, "<location>0 inf 0</location>", 1)
    model = _arm26_with_forceset_in(tmp_path, "arm26_forces.xml", bad)
    with pytest.raises(mb.ModelError, match=re.escape(str(tmp_path / "arm26_forces.xml")) + r":\d+: holds a "
                       r"non-finite number \('0 inf 0'\)"):
        mb.load_osim(model)


def test_a_default_outside_its_range_warns_as_the_builder_does(tmp_path):
    """OpenSim 4.6 loads it and starts there (checked: getDefaultValue() 0 with range
    [1, 1.2]); before, jaxmb did so silently while ModelBuilder.add_coordinate warned."""
    text = (DATA / "arm26.osim").read_text()
    start = text.index('<Coordinate name="r_elbow_flex">')
    end = text.index("</Coordinate>", start)
    block = re.sub(r"<range>[^<]*</range>", "<range>1 1.2</range>", text[start:end])
    block = re.sub(r"<default_value>[^<]*</default_value>", "<default_value>0</default_value>", block)
    (tmp_path / "arm.osim").write_text(text[:start] + block + text[end:])
    with pytest.warns(UserWarning, match=r"arm\.osim:\d+: default_value 0 is outside its range \[1, 1\.2\]"):
        model = mb.load_osim(tmp_path / "arm.osim")
    assert float(model.q_default[model.coordinate_names.index("r_elbow_flex")]) == 0.0
