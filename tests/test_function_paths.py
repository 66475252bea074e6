"""Muscle paths given as functions of the coordinates (OpenSim's FunctionBasedPath with a
MultivariatePolynomialFunction length): OpenSim 4.6's values
(tests/data/opensim/opensim_function_paths_reference.py), the closed-form moment arms
against autodiff, and the errors."""

import math
import pathlib
import xml.etree.ElementTree as ET

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb
from assertions import assert_tree_allclose
from models_for_tests import muscled_elbow

DATA = pathlib.Path(__file__).parent / "data" / "opensim"
REF = np.load(DATA / "function_paths.npz")
FITTED = mb.load_osim(DATA / "arm26_function_paths.osim")


def test_coefficients_follow_opensims_order_of_monomials():
    """Ascending exponent tuples, the last argument's power fastest (OpenSim's
    ``getTermValues`` at prime arguments, factored, gives this order)."""
    assert mb.polynomial_exponents(2, 2).tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [2, 0]]
    e = mb.polynomial_exponents(3, 4)
    assert e.shape == (math.comb(7, 4), 3) and e.sum(axis=1).max() == 4
    assert [tuple(r) for r in e] == sorted(tuple(r) for r in e)


@eqx.filter_jit
def _value_and_gradients(p, xs):
    return jax.vmap(lambda x: (p(x), p.gradient(x), jax.grad(p)(x)))(xs)


def test_polynomial_values_and_gradients_are_opensims():
    """Dimensions 1 to 4, orders 1 to 5, random coefficients, 4 random arguments each:
    value and gradient against OpenSim's calcValue and calcDerivative, and the
    closed-form gradient against jax.grad."""
    for first in range(0, len(REF["poly_dim"]), 4):
        rows = slice(first, first + 4)
        dim, order = int(REF["poly_dim"][first]), int(REF["poly_order"][first])
        assert np.all(REF["poly_coefficients"][rows] == REF["poly_coefficients"][first])  # one polynomial
        p = mb.MultivariatePolynomial(REF["poly_coefficients"][first][:math.comb(dim + order, order)], dim, order)
        value, grad, autodiff = _value_and_gradients(p, jnp.asarray(REF["poly_x"][rows, :dim]))
        want = REF["poly_gradient"][rows, :dim]
        np.testing.assert_allclose(value, REF["poly_value"][rows], rtol=0,
                                   atol=1e-13 * (1.0 + np.abs(REF["poly_value"][rows]).max()))
        np.testing.assert_allclose(grad, want, rtol=0, atol=1e-12 * (1.0 + np.abs(want).max()))
        np.testing.assert_allclose(grad, autodiff, rtol=0, atol=1e-12 * (1.0 + np.abs(want).max()))


def test_fitted_arm26_matches_opensim():
    """arm26 with PolynomialPathFitter's paths: lengths, lengthening speeds and moment arms
    (OpenSim's computeMomentArm) at 20 random states, to round-off."""
    assert FITTED.muscle_names == tuple(REF["muscle_names"])
    assert FITTED.coordinate_names == tuple(REF["coordinate_names"])
    assert all(m.path is not None and not m.points for m in FITTED.muscles)
    q, qd = jnp.asarray(REF["q"]), jnp.asarray(REF["qd"])
    lengths, R = jax.vmap(lambda x: mb.muscle_lengths_and_moment_arms(FITTED, x))(q)
    np.testing.assert_allclose(lengths, REF["lengths"], rtol=1e-13)
    np.testing.assert_allclose(R, REF["moment_arms"], rtol=0, atol=1e-14)
    assert np.abs(REF["moment_arms"]).max() > 0.02  # moment arms of centimetres
    speeds = jax.vmap(lambda x, v: mb.muscle_lengthening_speeds(FITTED, x, v))(q, qd)
    np.testing.assert_allclose(speeds, REF["speeds"], rtol=0, atol=1e-14)


def test_closed_form_moment_arms_are_minus_dl_dq():
    q = jnp.asarray(REF["q"])
    for method in ("closed_form", "frozen_path"):
        R = jax.vmap(lambda x, method=method: mb.moment_arms(FITTED, x, method=method))(q)
        assert_tree_allclose(R, jax.vmap(lambda x: mb.moment_arms(FITTED, x, method="autodiff"))(q), rtol=0, atol=1e-15)


def test_a_coupled_coordinate_enters_through_its_function():
    """A path over a coordinate coupled to q (c = 2 q_1 + 0.3): R = -P'(c) dc/dq, by the chain rule."""
    arm = mb.load_osim(DATA.parents[1].parent / "jaxmb" / "data" / "arm26.osim")
    poly = mb.MultivariatePolynomial([0.3, -0.02, 0.004], 1, 2)
    muscle = mb.Muscle("coupled", (), path=mb.FunctionBasedPath([mb.Linear([1], [2.0], 0.3)], poly))
    model = eqx.tree_at(lambda m: m.muscles, arm, (muscle,))
    q = jnp.array([0.2, 0.7])
    c = 2.0 * 0.7 + 0.3
    np.testing.assert_allclose(mb.muscle_lengths(model, q), [0.3 - 0.02 * c + 0.004 * c**2], rtol=1e-15)
    np.testing.assert_allclose(mb.moment_arms(model, q), [[0.0], [-2.0 * (-0.02 + 0.008 * c)]], rtol=1e-15)


def test_paths_of_points_and_functions_mix_in_model_order():
    """Muscles of both kinds in one model: each keeps its own length and moment arms, in
    `model.muscle_names` order."""
    elbow = muscled_elbow([("flexor", "flexor", None), ("extensor", "extensor", None)])
    poly = mb.MultivariatePolynomial([0.3, -0.02, 0.004], 1, 2)
    fitted = mb.Muscle("fitted", (), path=mb.FunctionBasedPath([mb.Coordinate(0)], poly))
    model = eqx.tree_at(lambda m: m.muscles, elbow, (elbow.muscles[0], fitted, elbow.muscles[1]))
    alone = eqx.tree_at(lambda m: m.muscles, elbow, (fitted,))
    q = jnp.array([[0.1], [0.9], [1.7]])
    got = jax.vmap(lambda x: mb.muscle_lengths_and_moment_arms(model, x))(q)
    points = jax.vmap(lambda x: mb.muscle_lengths_and_moment_arms(elbow, x))(q)
    function = jax.vmap(lambda x: mb.muscle_lengths_and_moment_arms(alone, x))(q)
    for g, p, f in zip(got, points, function):
        np.testing.assert_array_equal(g[..., [0, 2]], p)
        np.testing.assert_array_equal(g[..., [1]], f)
    np.testing.assert_allclose(got[0][:, 1], 0.3 - 0.02 * q[:, 0] + 0.004 * q[:, 0] ** 2, rtol=1e-15)
    status = jax.vmap(lambda x: mb.path_status(model, x).ok)(q)
    assert status.shape == (3, 3) and bool(status.all())
    events = mb.path_events(model, q[0])
    assert [e.size for e in events.conditional_active] == [2, 0, 2]


def test_muscle_forces_act_through_the_fitted_moment_arms():
    """The generalized force of the fitted muscles is R F, as for paths of points."""
    q, qd = jnp.asarray(REF["q"][0]), jnp.asarray(REF["qd"][0])
    lengths, R = mb.muscle_lengths_and_moment_arms(FITTED, q)
    a = jnp.full(6, 0.4)
    force = mb.muscle_forces(FITTED, a, lengths, mb.muscle_lengthening_speeds(FITTED, q, qd))
    assert bool(jnp.all(force > 0.0))
    np.testing.assert_allclose(R @ force, -jax.grad(lambda x: mb.muscle_lengths(FITTED, x) @ force)(q), rtol=1e-13)


@pytest.mark.parametrize("build, message", [
    (lambda: mb.MultivariatePolynomial([1.0, 2.0], 2, 1), r"2 arguments of order 1 need C\(2 \+ 1, 1\) = 3 coefficients, got 2"),
    (lambda: mb.MultivariatePolynomial([1.0, np.nan, 0.0], 2, 1), r"coefficients must be finite"),
    (lambda: mb.MultivariatePolynomial([1.0], 0, 0), r"dimension must be an integer >= 1"),
    # A table was flattened, extra arguments ignored (probe 40):
    (lambda: mb.MultivariatePolynomial([[1.0, 2.0, 3.0]], 2, 1), r"coefficients must be a 1-D array .* \(1, 3\)"),
    (lambda: mb.MultivariatePolynomial([1.0, 2.0, 3.0], 2, 1)(jnp.zeros(3)), r"x must hold its 2 arguments"),
    (lambda: mb.FunctionBasedPath([mb.Coordinate(0)], mb.MultivariatePolynomial([1.0, 2.0, 3.0], 2, 1)),
     r"the length function has 2 arguments but the path names 1 coordinates"),
    (lambda: mb.FunctionBasedPath([0], mb.MultivariatePolynomial([1.0, 2.0], 1, 1)), r"coordinates must be joint functions"),
    (lambda: mb.Muscle("m", (mb.PathPoint("ground", (0, 0, 0)), mb.PathPoint("ground", (1, 0, 0))),
                       path=FITTED.muscles[0].path), r"Muscle 'm': a path given as a function has no path points"),
])
def test_bad_function_paths_are_refused_at_construction(build, message):
    with pytest.raises(mb.ModelError, match=message):
        build()


def test_polynomial_exponents_refuse_an_order_below_zero():
    """Before: an empty table for order -1."""
    with pytest.raises(ValueError, match="order an integer >= 0, got 2 and -1"):
        mb.polynomial_exponents(2, -1)


@pytest.mark.parametrize("old, new, message", [
    ("<MultivariatePolynomialFunction>", "<PiecewiseLinearFunction>", r"length_function> is a MultivariatePolynomialFunction"),
    ("</length_function>", "</length_function><moment_arm_functions><Constant><value>0.1</value></Constant>"
                           "</moment_arm_functions>",
     r"moment arms and lengthening speed from its length function"),
    ("<coordinate_paths>/jointset/r_elbow/r_elbow_flex</coordinate_paths>",
     "<coordinate_paths>/jointset/r_elbow/r_knee</coordinate_paths>", r"unknown coordinate '/jointset/r_elbow/r_knee'"),
    ("<dimension>1</dimension>", "<dimension>2</dimension>", r"muscle 'TRIlat': .* need C\(2 \+ 5, 5\) = 21 coefficients"),
])
def test_the_importer_names_the_muscle_and_the_fix(tmp_path, old, new, message):
    text = (DATA / "arm26_function_paths.osim").read_text()
    assert old in text, old
    path = tmp_path / "broken.osim"
    path.write_text(text.replace(old, new, 1) if "PiecewiseLinear" not in new else
                    text.replace(old, new, 1).replace("</MultivariatePolynomialFunction>", "</PiecewiseLinearFunction>", 1))
    with pytest.raises(mb.ModelError, match=message):
        mb.load_osim(path)


def _slider():
    """A block sliding along x (coordinate "x" in [0.5, 1]) with a muscle from the ground's
    origin to the block's point (0.1, 0, 0): its length is exactly x + 0.1."""
    b = mb.ModelBuilder("slider")
    c = b.add_coordinate("x", default=0.75, range=(0.5, 1.0))
    b.add_body(mb.Body("block", 1.0, (0.0, 0.0, 0.0), jnp.eye(3) * 1e-3))
    b.add_joint(mb.prismatic("slide", "ground", "block", (1, 0, 0), mb.Coordinate(c)))
    b.muscles.append(mb.Muscle("pull", [mb.PathPoint("ground", (0.0, 0.0, 0.0)), mb.PathPoint("block", (0.1, 0.0, 0.0))]))
    return b.build()


def test_a_polynomial_length_is_recovered_exactly():
    fit = mb.fit_function_paths(_slider(), np.linspace(0.5, 1.0, 7)[:, None])
    assert fit.orders == (1,)
    np.testing.assert_allclose(fit.model.muscles[0].path.length_function.coefficients, [0.1, 1.0], atol=1e-14)
    assert fit.length_max[0] < 1e-14 and fit.moment_arm_max[0] < 1e-14
    assert fit.model.muscles[0].points == () and fit.model.muscle_names == ("pull",)


def test_the_fit_takes_the_lowest_order_meeting_the_tolerances_and_reports_its_errors():
    """A straight muscle over a hinge (length sqrt(a + b cos(θ + φ)), not a polynomial):
    the reported errors are the fitted model's at the samples, the order is the first
    whose RMS errors meet the tolerances, and the fit holds between the samples."""
    elbow = muscled_elbow([("flexor", "flexor", None), ("extensor", "extensor", None)])
    samples = np.linspace(-0.5, 2.5, 41)[:, None]
    fit = mb.fit_function_paths(elbow, samples, length_tolerance=1e-4, moment_arm_tolerance=5e-4)
    assert all(1 < n <= 6 for n in fit.orders)
    L0, R0 = jax.vmap(lambda x: mb.muscle_lengths_and_moment_arms(elbow, x))(jnp.asarray(samples))
    L1, R1 = jax.vmap(lambda x: mb.muscle_lengths_and_moment_arms(fit.model, x))(jnp.asarray(samples))
    np.testing.assert_allclose(fit.length_rms, np.sqrt(np.mean((L1 - L0) ** 2, axis=0)), rtol=1e-8)
    np.testing.assert_allclose(fit.moment_arm_max, np.abs(R1 - R0).max(axis=(0, 1)), rtol=1e-8)
    assert np.all(fit.length_rms <= 1e-4) and np.all(fit.moment_arm_rms <= 5e-4)
    assert fit.outliers.tolist() == [0, 0] and fit.samples.tolist() == [41, 41]  # a smooth path has none
    lower = mb.fit_function_paths(elbow, samples, max_order=min(fit.orders) - 1, length_tolerance=1e-4,
                                  moment_arm_tolerance=5e-4)
    k = int(np.argmin(fit.orders))
    assert lower.length_rms[k] > 1e-4 or lower.moment_arm_rms[k] > 5e-4
    between = jnp.asarray(samples[:-1] + 0.5 * np.diff(samples, axis=0))
    L2 = jax.vmap(lambda x: mb.muscle_lengths(fit.model, x))(between)
    L3 = jax.vmap(lambda x: mb.muscle_lengths(elbow, x))(between)
    assert np.abs(L2 - L3).max() < 3 * fit.length_max.max()


def test_a_few_samples_far_off_the_fit_are_left_out_as_outliers():
    """Geometry gone astray at a few states (here a conditional point that detours the path
    by 15 cm at 3 of 101 samples, as an ellipsoid wrap's construction can without
    `path_status` noticing) bends a least-squares fit everywhere: left out, the slider's
    exact length x + 0.1 is recovered; kept (OpenSim's fitter's way), it is not."""
    b = mb.ModelBuilder("slider")
    c = b.add_coordinate("x", default=0.75, range=(0.5, 1.0))
    b.add_body(mb.Body("block", 1.0, (0.0, 0.0, 0.0), jnp.eye(3) * 1e-3))
    b.add_joint(mb.prismatic("slide", "ground", "block", (1, 0, 0), mb.Coordinate(c)))
    b.muscles.append(mb.Muscle("pull", [mb.PathPoint("ground", (0.0, 0.0, 0.0)),
                                        mb.ConditionalPathPoint("ground", (0.5, 0.3, 0.0), mb.Coordinate(c), (0.988, 1.0)),
                                        mb.PathPoint("block", (0.1, 0.0, 0.0))]))
    samples = np.linspace(0.5, 1.0, 101)[:, None]
    fit = mb.fit_function_paths(b.build(), samples)
    assert fit.orders == (1,) and fit.outliers.tolist() == [3] and fit.samples.tolist() == [98]
    np.testing.assert_allclose(fit.model.muscles[0].path.length_function.coefficients, [0.1, 1.0], atol=1e-14)
    assert fit.length_max[0] < 1e-14
    kept = mb.fit_function_paths(b.build(), samples, reject_outliers=False)
    assert kept.outliers.tolist() == [0] and kept.samples.tolist() == [101] and kept.length_rms[0] > 0.02


def test_a_fitted_length_below_zero_is_not_a_plausible_path():
    """A polynomial fitted around a motion can go below zero far from its samples; path_status
    passed such a length as plausible (a muscle force model then pushed)."""
    fit = mb.fit_function_paths(_slider(), np.linspace(0.5, 1.0, 7)[:, None]).model
    shifted = eqx.tree_at(lambda m: m.muscles[0].path.length_function.coefficients, fit, jnp.array([-0.8, 1.0]))
    ok = jax.vmap(lambda q: mb.path_status(shifted, q).plausible[0])(jnp.array([[0.6], [0.9]]))
    assert np.asarray(ok).tolist() == [False, True]  # lengths -0.2 and 0.1 m


def test_fitting_refuses_what_it_cannot_fit():
    with pytest.raises(ValueError, match=r"q must be finite samples of shape \(S, 1\)"):
        mb.fit_function_paths(_slider(), np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"1 sample states \(1 distinct\) cannot determine muscle 'pull''s 2 "
                                         r"coefficients of order 1 with errors to spare"):
        mb.fit_function_paths(_slider(), np.array([[0.6]]), max_order=3, length_tolerance=1e-30)
    # The same state 50 times reported a perfect fit (no residual: the fit was exactly determined).
    with pytest.raises(ValueError, match=r"50 sample states \(1 distinct\) cannot determine"):
        mb.fit_function_paths(_slider(), np.full((50, 1), 0.6))
    samples = np.linspace(0.5, 1.0, 7)[:, None]
    for bad in (-1e-3, 0.0, np.nan):
        with pytest.raises(ValueError, match="length_tolerance must be a positive number of metres"):
            mb.fit_function_paths(_slider(), samples, length_tolerance=bad)
        with pytest.raises(ValueError, match="moment_arm_tolerance must be a positive number of metres"):
            mb.fit_function_paths(_slider(), samples, moment_arm_tolerance=bad)
    with pytest.raises(ValueError, match="model 'double_pendulum' has no muscles or ligaments"):  # ZeroDivisionError
        mb.fit_function_paths(mb.models.double_pendulum(), np.zeros((8, 2)))


def test_written_path_sets_are_opensims_own_format(tmp_path):
    """`write_function_paths` writes what OpenSim's PolynomialPathFitter wrote for the fitted
    arm26 (its paths, as OpenSim printed them into arm26_function_paths.osim): the same
    coordinate paths, dimensions, orders and coefficients (float64 round trip)."""
    out = tmp_path / "paths.xml"
    mb.io.write_function_paths(FITTED, out, mb.io.read_osim(DATA / "arm26_function_paths.osim").coordinates)
    written = ET.parse(out).getroot()
    assert written.tag == "OpenSimDocument" and written[0].tag == "Set_FunctionBasedPath_"
    paths = written.findall("./Set_FunctionBasedPath_/objects/FunctionBasedPath")
    opensim = ET.parse(DATA / "arm26_function_paths.osim").getroot()
    muscles = opensim.findall(".//ForceSet/objects/*")
    assert [p.get("name") for p in paths] == [f"/forceset/{m.get('name')}" for m in muscles]
    for p, m in zip(paths, muscles):
        theirs = m.find("FunctionBasedPath")
        assert p.findtext("coordinate_paths") == theirs.findtext("coordinate_paths")
        for tag in ("dimension", "order"):
            assert p.findtext(f"length_function/MultivariatePolynomialFunction/{tag}") == \
                theirs.findtext(f"length_function/MultivariatePolynomialFunction/{tag}")
        mine = np.array(p.findtext("length_function/MultivariatePolynomialFunction/coefficients").split(), float)
        np.testing.assert_array_equal(
            mine, np.array(theirs.findtext("length_function/MultivariatePolynomialFunction/coefficients").split(), float))
    with pytest.raises(mb.ModelError, match=r"has no function-based paths; fit them"):
        mb.io.write_function_paths(_slider(), tmp_path / "none.xml", ())


ARM26 = pathlib.Path(mb.__file__).parent / "data" / "arm26.osim"


def test_samples_around_a_motion_are_a_latin_hypercube_per_frame():
    """Each frame, then its samples: per coordinate one sample in each of the
    `samples_per_frame` strata of the bounds (a Latin hypercube), clipped to the ranges;
    the same seed gives the same samples."""
    model = mb.load_osim(ARM26)
    lo, hi = np.asarray(model.q_lower), np.asarray(model.q_upper)
    frames = np.stack([lo + 0.3 * (hi - lo), lo + 0.6 * (hi - lo), hi])  # the last at the upper ends
    n, bounds = 8, np.array([[-0.1, 0.05], [-0.2, 0.3]])
    samples = mb.sample_around_motion(model, frames, samples_per_frame=n, bounds=bounds, seed=3)
    assert samples.shape == (3 * (1 + n), model.nq)
    per_frame = samples.reshape(3, 1 + n, model.nq)
    np.testing.assert_array_equal(per_frame[:, 0], frames)
    for f in range(2):  # away from the ranges' ends: the strata, each hit once
        u = (per_frame[f, 1:] - frames[f] - bounds[:, 0]) / (bounds[:, 1] - bounds[:, 0])
        assert np.all((u >= 0) & (u < 1))
        for j in range(model.nq):
            assert sorted(np.floor(u[:, j] * n).astype(int)) == list(range(n))
    assert np.all(per_frame[2, 1:] <= hi) and np.any(per_frame[2, 1:] == hi) and np.all(per_frame[2, 1:] >= hi - 0.2)
    np.testing.assert_array_equal(samples, mb.sample_around_motion(model, frames, samples_per_frame=n,
                                                                   bounds=bounds, seed=3))
    assert not np.array_equal(samples, mb.sample_around_motion(model, frames, samples_per_frame=n,
                                                               bounds=bounds, seed=4))
    default = mb.sample_around_motion(model, frames[:2], samples_per_frame=n)  # +-10 degrees
    assert np.abs(default.reshape(2, 1 + n, -1) - frames[:2, None]).max() <= np.pi / 18
    with pytest.raises(ValueError, match=r"bounds must be finite \(lo, hi\) with lo < hi"):
        mb.sample_around_motion(model, frames, bounds=(0.1, -0.1))
    with pytest.raises(ValueError, match=r"q must be finite frames of shape \(F, 2\)"):
        mb.sample_around_motion(model, frames[:, :1])
    with pytest.raises(ValueError, match=r"samples_per_frame must be at least 1"):
        mb.sample_around_motion(model, frames, samples_per_frame=0)


def test_a_path_set_replaces_the_paths_it_names(tmp_path):
    """`load_osim(..., function_paths=)` reads OpenSim's path set file: arm26 with the set
    of OpenSim's fitted paths is OpenSim's fitted arm26 (its values at 20 random states, to
    round-off); a set naming some muscles leaves the others' paths of points."""
    coordinates = mb.io.read_osim(DATA / "arm26_function_paths.osim").coordinates
    mb.io.write_function_paths(FITTED, tmp_path / "all.xml", coordinates)
    model = mb.load_osim(ARM26, function_paths=tmp_path / "all.xml")
    assert all(m.path is not None and not m.points and not m.wraps for m in model.muscles)
    q = jnp.asarray(REF["q"])
    lengths, R = jax.vmap(lambda x: mb.muscle_lengths_and_moment_arms(model, x))(q)
    np.testing.assert_allclose(lengths, REF["lengths"], rtol=1e-13)
    np.testing.assert_allclose(R, REF["moment_arms"], rtol=0, atol=1e-14)
    assert model.muscles[0].parameters == mb.load_osim(ARM26).muscles[0].parameters

    some = eqx.tree_at(lambda m: m.muscles, FITTED, FITTED.muscles[:2])
    mb.io.write_function_paths(some, tmp_path / "some.xml", coordinates)
    mixed, geometric = mb.load_osim(ARM26, function_paths=tmp_path / "some.xml"), mb.load_osim(ARM26)
    assert [m.path is not None for m in mixed.muscles] == [True, True] + [False] * 4
    x = REF["q"][0]
    np.testing.assert_allclose(mb.muscle_lengths(mixed, x)[:2], REF["lengths"][0, :2], rtol=1e-13)
    np.testing.assert_array_equal(mb.muscle_lengths(mixed, x)[2:], mb.muscle_lengths(geometric, x)[2:])


def test_path_sets_that_do_not_fit_the_model_are_refused(tmp_path):
    coordinates = mb.io.read_osim(DATA / "arm26_function_paths.osim").coordinates
    mb.io.write_function_paths(FITTED, tmp_path / "all.xml", coordinates)
    text = (tmp_path / "all.xml").read_text()
    (tmp_path / "other.xml").write_text(text.replace("/forceset/BRA", "/forceset/brachialis"))
    with pytest.raises(mb.ModelError, match=r"other.xml:\d+: the path set names force 'brachialis', which is not a "
                                            r"muscle or ligament of the model"):
        mb.load_osim(ARM26, function_paths=tmp_path / "other.xml")
    # with a list of muscles, the others' paths are not read
    assert mb.io.read_osim(ARM26, muscles=["BRA"], function_paths=tmp_path / "all.xml").model.muscles[0].path is not None
    (tmp_path / "twice.xml").write_text(text.replace("/forceset/BRA", "/forceset/BIClong"))
    with pytest.raises(mb.ModelError, match=r"a second path for force 'BIClong'"):
        mb.load_osim(ARM26, function_paths=tmp_path / "twice.xml")
    (tmp_path / "coordinate.xml").write_text(text.replace("/r_elbow/r_elbow_flex", "/r_elbow/elbow"))
    with pytest.raises(mb.ModelError, match=r"unknown coordinate '/jointset/r_elbow/elbow'"):
        mb.load_osim(ARM26, function_paths=tmp_path / "coordinate.xml")
    with pytest.raises(mb.ModelError, match=r"not an OpenSim path set: expected <Set_FunctionBasedPath_>"):
        mb.load_osim(ARM26, function_paths=ARM26)


def test_a_path_set_replaces_a_ligaments_path(tmp_path):
    """A path in the set named after a Ligament replaces its path, as OpenSim's
    ModOpReplacePathsWithFunctionBasedPaths does: its length is the polynomial's and its
    moment arm minus the polynomial's derivative, in the force set's generalized forces."""
    model_file = DATA / "forces_model.osim"
    (tmp_path / "set.xml").write_text(
        '<OpenSimDocument Version="40600"><Set_FunctionBasedPath_><objects>'
        '<FunctionBasedPath name="/forceset/ligament"><coordinate_paths>/jointset/j0/q0</coordinate_paths>'
        '<length_function><MultivariatePolynomialFunction><coefficients>0.6 0.1 0.05</coefficients>'
        '<dimension>1</dimension><order>2</order></MultivariatePolynomialFunction></length_function>'
        '</FunctionBasedPath></objects></Set_FunctionBasedPath_></OpenSimDocument>')
    model = mb.load_osim(model_file, function_paths=tmp_path / "set.xml")
    ligament, = (f for f in model.forces if isinstance(f, mb.Ligament))
    geometric, = (f for f in mb.load_osim(model_file).forces if isinstance(f, mb.Ligament))
    assert ligament.path.path is not None and geometric.path.path is None
    k = model.coordinate_names.index("q0")
    rng = np.random.default_rng(0)
    for q in rng.uniform(-0.5, 0.5, (3, model.nq)):
        length, arms = ligament.length_and_moment_arms(model, q)
        assert float(length) == pytest.approx(0.6 + 0.1 * q[k] + 0.05 * q[k] ** 2, rel=1e-14)
        want = np.zeros(model.nq)
        want[k] = -(0.1 + 0.1 * q[k])
        np.testing.assert_allclose(arms, want, rtol=1e-14, atol=0)
        assert float(length) != pytest.approx(float(geometric.length_and_moment_arms(model, q)[0]))


def test_ligaments_paths_are_fitted_written_and_read_back(tmp_path):
    """`fit_function_paths` fits a Ligament's path as OpenSim's fitter does (every path of
    the model): within its tolerances at the samples and close to the geometric path between
    them, reported after the muscles (`names`); the path set written names it and reads back
    into the same ligament."""
    model_file = DATA / "forces_model.osim"
    model = mb.load_osim(model_file)
    lo, hi = np.full(model.nq, -0.3), np.full(model.nq, 0.3)  # its ranges are +-10 (rad and m)
    rng = np.random.default_rng(0)
    fit = mb.fit_function_paths(model, rng.uniform(lo, hi, (400, model.nq)), max_order=4)
    assert fit.names == ("ligament",) and fit.orders[0] >= 1 and fit.length_rms[0] <= 1e-3
    ligament, = (f for f in fit.model.forces if isinstance(f, mb.Ligament))
    geometric, = (f for f in model.forces if isinstance(f, mb.Ligament))
    assert ligament.path.path is not None and not ligament.path.points
    q = rng.uniform(lo, hi, model.nq)
    assert float(ligament.length_and_moment_arms(model, q)[0]) == pytest.approx(
        float(geometric.length_and_moment_arms(model, q)[0]), abs=1e-3)
    mb.io.write_function_paths(fit.model, tmp_path / "set.xml", mb.io.read_osim(model_file).coordinates)
    assert '<FunctionBasedPath name="/forceset/ligament">' in (tmp_path / "set.xml").read_text()
    back, = (f for f in mb.load_osim(model_file, function_paths=tmp_path / "set.xml").forces
             if isinstance(f, mb.Ligament))
    np.testing.assert_array_equal(back.path.path.length_function.coefficients,
                                  ligament.path.path.length_function.coefficients)
