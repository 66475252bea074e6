"""Ehsani (2016) kinematics: D_i and D'_i by recursion and closed form against autodiff of B_i(q);
point velocities and accelerations by Eq. 44 and 57 against jax.jvp."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb
from jaxmb._kinematics import _joint_rates_and_gradients  # private: the dynamics' one-evaluation form
from jaxmb import matrix_calculus
from jaxmb._spatial import matrix_derivative  # private math helper (no public counterpart)
from assertions import assert_tree_allclose
from models_for_tests import all_models, random_state

MODELS = all_models()
TOL = 1e-10  # norm-wise relative, float64, exact maths


# The matrix-calculus route runs eagerly: compiling its unrolled Kronecker products costs more
# than dispatching them.
D_recursive = matrix_calculus.D_recursive
D_closed_form = matrix_calculus.D_closed_form
D2_recursive = matrix_calculus.D2_recursive
D2_closed_form = matrix_calculus.D2_closed_form


@jax.jit
def _autodiff_D(model, q):
    jac = jax.jacfwd(lambda x: matrix_calculus.B_matrices(model, x))(q)  # (nb, 4, 4, nq)
    return [matrix_derivative(jac[i]) for i in range(model.n_bodies)]


@jax.jit
def _autodiff_D2(model, q):
    hes = jax.jacfwd(jax.jacfwd(lambda x: matrix_calculus.B_matrices(model, x)))(q)  # (nb, 4, 4, nq, nq)
    nq = model.nq
    # D'[(r nq + a) nq + b, c] = d²B_rc/dq_a dq_b
    return [jnp.transpose(hes[i], (0, 2, 3, 1)).reshape(4 * nq * nq, 4) for i in range(model.n_bodies)]


@pytest.mark.parametrize("name", list(MODELS))
def test_D_recursion_and_closed_form_equal_autodiff(name):
    model = MODELS[name]
    q = random_state(model, 1)[0]
    ref = _autodiff_D(model, q)
    assert_tree_allclose(D_recursive(model, q), ref, rtol=TOL, normwise=True)
    assert_tree_allclose(D_closed_form(model, q), ref, rtol=TOL, normwise=True)


@pytest.mark.parametrize("name", ["double_pendulum", "knee_like_tree"])
def test_D2_recursion_and_closed_form_equal_autodiff(name):
    model = MODELS[name]
    q = random_state(model, 2)[0]
    ref = _autodiff_D2(model, q)
    assert_tree_allclose(D2_recursive(model, q), ref, rtol=TOL, normwise=True)
    assert_tree_allclose(D2_closed_form(model, q), ref, rtol=TOL, normwise=True)


def test_printed_eq_88_is_wrong_for_a_non_root_joint():
    """Erratum: Eq. 88 writes W_iiᵀ ⊗ I ⊗ ∇f_i where (Â_iᵀ pr(i)_i A4ᵀ) ⊗ I ⊗ ∇f_i is right."""
    model = mb.models.planar_chain(3)
    q = jnp.array([0.4, -0.3, 0.9])
    local, poses, hats = matrix_calculus._frames(model, q)
    grads = mb.joint_gradients(model, q)
    d1 = D_recursive(model, q)
    i, p = 2, 1
    g = grads[i][:, None]
    eye = jnp.eye(model.nq)
    printed = jnp.kron(jnp.kron(hats[i].T @ poses[i].T, eye), g) @ d1[p]
    corrected = jnp.kron(jnp.kron(hats[i].T @ local[i].T, eye), g) @ d1[p]
    assert np.max(np.abs(printed - corrected)) > 1e-2


@pytest.mark.parametrize("name", ["three_link_arm_spring", "knee_like_tree"])
def test_point_velocity_and_acceleration_by_ehsani_formulas(name):
    """Eq. 44: v = D_iᵀ (r̄ ⊗ q'); Eq. 57: a = D'_iᵀ (r̄ ⊗ q'^[2]) + D_iᵀ (r̄ ⊗ q'')."""
    model = MODELS[name]
    q, qd, qdd = random_state(model, 3)
    point = jnp.array([0.05, -0.2, 0.1])
    body = model.n_bodies - 1
    rbar = jnp.concatenate([point, jnp.ones(1)])
    d = D_closed_form(model, q)[body]
    d2 = D2_closed_form(model, q)[body]
    v_ehsani = d.T @ jnp.kron(rbar, qd)
    a_ehsani = d2.T @ jnp.kron(rbar, jnp.kron(qd, qd)) + d.T @ jnp.kron(rbar, qdd)
    assert_tree_allclose((v_ehsani[:3], a_ehsani[:3]),
                         (mb.point_velocity(model, q, qd, body, point), mb.point_acceleration(model, q, qd, qdd, body, point)),
                         rtol=TOL, normwise=True)
    assert abs(float(v_ehsani[3])) < 1e-14 and abs(float(a_ehsani[3])) < 1e-14


def test_double_pendulum_positions():
    model = mb.models.double_pendulum(l1=1.0, l2=0.5)
    q = jnp.array([0.3, -1.1])
    tip = mb.point_position(model, q, "rod2", (0.0, -0.5, 0.0))
    expected = [np.sin(0.3) + 0.5 * np.sin(-1.1), -np.cos(0.3) - 0.5 * np.cos(-1.1), 0.0]
    np.testing.assert_allclose(tip, expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(mb.joint_values(model, q), [0.3, -1.4], atol=1e-15)
    # "ground", as path points name it: fixed, at its own coordinates
    np.testing.assert_array_equal(mb.point_position(model, q, "ground", (0.1, 0.2, 0.3)), [0.1, 0.2, 0.3])
    np.testing.assert_array_equal(mb.point_velocity(model, q, jnp.ones(2), "ground", (0.1, 0.2, 0.3)), np.zeros(3))
    np.testing.assert_array_equal(mb.point_jacobian(model, q, "ground"), np.zeros((3, 2)))


def test_angular_velocity_of_planar_chain_is_sum_of_rates():
    model = mb.models.planar_chain(3)
    q, qd, _ = random_state(model, 4)
    w = mb.body_angular_velocities(model, q, qd)
    np.testing.assert_allclose(w[:, 2], jnp.cumsum(qd), rtol=1e-13)
    np.testing.assert_allclose(w[:, :2], 0.0, atol=1e-14)


def test_body_transforms_are_rigid():
    model = MODELS["knee_like_tree"]
    poses = mb.body_transforms(model, random_state(model, 5)[0])
    for t in poses:
        np.testing.assert_allclose(t[:3, :3].T @ t[:3, :3], np.eye(3), atol=1e-13)
        np.testing.assert_allclose(t[3], [0, 0, 0, 1], atol=0)


def test_joint_rates_match_gradients_and_hessians():
    model = MODELS["knee_like_tree"]
    q, qd, qdd = random_state(model, 6)
    f, fd, fdd = mb.joint_rates(model, q, qd, qdd)
    jac = mb.joint_gradients(model, q)
    hes = mb.joint_hessians(model, q)
    np.testing.assert_allclose(f, mb.joint_values(model, q), rtol=1e-14)
    np.testing.assert_allclose(fd, jac @ qd, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(fdd, jac @ qdd + jnp.einsum("a,iab,b->i", qd, hes, qd), rtol=1e-12, atol=1e-13)


def _coupled_chain():
    """Nine revolute joints in a chain driven by two coordinates: three Fourier series
    of q0 alike in shape and frequency, one of another frequency, two splines of q1 on
    the same knots, two periodic quintic splines of q0 on one grid, one coordinate."""
    b = mb.ModelBuilder("coupled_chain")
    q0, q1 = b.add_coordinate("crank"), b.add_coordinate("flexion")
    x = jnp.linspace(-2.0, 2.0, 9)
    grid = jnp.linspace(0.0, 2 * np.pi, 33)
    functions = [
        mb.FourierSeries(q0, 0.1, jnp.array([0.9, 0.05, -0.2]), jnp.array([0.1, -0.02, 0.3]), 1.0, slope=-1.0),
        mb.Coordinate(q1),
        mb.FourierSeries(q0, -0.3, jnp.array([0.2, 0.4, 0.1]), jnp.array([-0.5, 0.2, 0.0]), 1.0),
        mb.CubicSpline.fit(q1, x, 0.3 * jnp.sin(x)),
        mb.FourierSeries(q0, 0.0, jnp.array([0.0, 0.1, 0.7]), jnp.array([0.3, 0.3, -0.1]), 1.0),
        mb.CubicSpline.fit(q1, x, 0.1 * x**2 - 0.2 * x),
        mb.FourierSeries(q0, 0.2, jnp.array([0.4, -0.3, 0.2]), jnp.array([0.1, 0.6, -0.2]), 1.7, slope=0.5),
        mb.QuinticSpline.fit(q0, grid, jnp.sin(grid) - grid, jnp.cos(grid) - 1.0, -jnp.sin(grid), periodic=True,
                             slope=-1.0),
        mb.QuinticSpline.fit(q0, grid, jnp.cos(2 * grid), -2 * jnp.sin(2 * grid), -4 * jnp.cos(2 * grid),
                             periodic=True),
    ]
    parent = "ground"
    for k, fn in enumerate(functions):
        b.add_body(mb.Body(f"link{k}", 1.0 + 0.1 * k, (0.0, -0.2, 0.01 * k), np.diag([0.02, 0.01, 0.02])))
        b.add_joint(mb.revolute(f"j{k}", parent, f"link{k}", (0.1 * k, 0.0, 1.0), fn, offset=(0.0, -0.4, 0.0)))
        parent = f"link{k}"
    return b.build()


def test_alike_joint_functions_are_evaluated_together_with_the_same_values():
    """Joint functions of one kind and shape run as one function (three Fourier series
    of one frequency -> one cosine in the trace, not three; the series of another
    frequency apart; in the dynamics' rates-and-gradients form, the three series from
    one set of harmonics, the two quintic splines from one gather); values, gradients, Hessians and rates equal the joints' own
    one-by-one evaluation to round-off."""
    model = _coupled_chain()
    q, qd = jnp.array([0.7, -0.4]), jnp.array([1.3, -2.2])
    fns = [j.function for j in model.joints]
    np.testing.assert_allclose(mb.joint_values(model, q), jnp.stack([f(q) for f in fns]), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(mb.joint_gradients(model, q), jnp.stack([f.gradient(q) for f in fns]),
                               rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(mb.joint_hessians(model, q), jnp.stack([f.hessian(q) for f in fns]),
                               rtol=1e-14, atol=1e-15)
    stacked = lambda per_function: tuple(jnp.stack(x) for x in zip(*per_function))  # noqa: E731
    assert_tree_allclose(tuple(mb.joint_rates(model, q, qd)), stacked(f.rates(q, qd) for f in fns),
                         rtol=1e-14, atol=1e-15)
    # The dynamics' one-evaluation form: rates and gradients together.
    combined = tuple(_joint_rates_and_gradients(model, q, qd))
    assert_tree_allclose(combined, stacked(f.rates_and_gradient(q, qd) for f in fns), rtol=1e-13, atol=1e-14)
    assert_tree_allclose(combined, (*mb.joint_rates(model, q, qd), mb.joint_gradients(model, q)),
                         rtol=1e-13, atol=1e-14)
    jaxpr = str(jax.make_jaxpr(lambda x: mb.joint_values(model, x))(q))
    assert jaxpr.count(" cos ") == 2, jaxpr  # one per frequency
    rates = str(jax.make_jaxpr(lambda x, v: _joint_rates_and_gradients(model, x, v))(q, qd))
    assert rates.count(" floor ") == 1, rates  # the quintic splines' interval, once
    # A loop of the dynamics through the grouped functions agrees with the autodiff route.
    np.testing.assert_allclose(mb.mass_matrix(model, q), mb.mass_matrix(model, q, method="autodiff"), rtol=1e-12)


def test_small_matmul_equals_matmul():
    from jaxmb._spatial import small_matmul, small_matvec  # private: the written-out products, checked alone

    rng = np.random.default_rng(3)
    for sa, sb in (((5, 3, 3), (5, 3, 3)), ((2, 4, 4), (2, 4, 4)), ((7, 3, 3), (7, 3, 2)), ((6, 6), (6, 2))):
        a, b = jnp.asarray(rng.normal(size=sa)), jnp.asarray(rng.normal(size=sb))
        np.testing.assert_allclose(small_matmul(a, b), a @ b, rtol=1e-14, atol=1e-15)
    a, v = jnp.asarray(rng.normal(size=(4, 3, 3))), jnp.asarray(rng.normal(size=(4, 3)))
    np.testing.assert_allclose(small_matvec(a, v), jnp.einsum("nij,nj->ni", a, v), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("name", ["knee_like_tree", "planar_chain_4"])
def test_joint_transforms_equal_offsets_times_matrix_exponential(name):
    """Every joint's local transform (Eq. 38), the affine-in-(sin f, 1 - cos f, f) form
    the library evaluates, equals P · X(f) · C composed here from the joint's data, with
    the rotation as the matrix exponential exp(f K) (scipy) and a prismatic joint's
    translation f · axis."""
    from scipy.linalg import expm

    model = MODELS[name]
    for seed_ in (0, 1, 2):
        q = random_state(model, seed_, scale=2.5)[0]
        f = np.asarray(mb.joint_values(model, q))
        got = np.asarray(mb.joint_transforms(model, jnp.asarray(f)))
        for i, joint in enumerate(model.joints):
            axis = np.asarray(joint.axis)
            motion = np.eye(4)
            if joint.kind == "revolute":
                k = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
                motion[:3, :3] = expm(f[i] * k)
            else:
                motion[:3, 3] = f[i] * axis
            parent, child = np.eye(4), np.eye(4)
            parent[:3, :3], parent[:3, 3] = joint.parent_rotation, joint.parent_translation
            child[:3, :3], child[:3, 3] = joint.child_rotation, joint.child_translation
            # expm and the two products each round: 2e-15 seen, a wrong sign is O(1).
            np.testing.assert_allclose(got[i], parent @ motion @ child, rtol=0, atol=5e-15)
