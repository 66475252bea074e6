"""Seed 001 kinematics: D_i and D'_i by recursion and closed form against autodiff of B_i(q);
point velocities and accelerations by Eq. 44 and 57 against jax.jvp."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb
from jaxmb import seed
from jaxmb._spatial import matrix_derivative
from models_for_tests import all_models, random_state

MODELS = all_models()
TOL = 1e-10  # relative, float64, exact maths


# The seed route runs eagerly: compiling its unrolled Kronecker products costs more
# than dispatching them.
D_recursive = seed.D_recursive
D_closed_form = seed.D_closed_form
D2_recursive = seed.D2_recursive
D2_closed_form = seed.D2_closed_form


@jax.jit
def _autodiff_D(model, q):
    jac = jax.jacfwd(lambda x: seed.B_matrices(model, x))(q)  # (nb, 4, 4, nq)
    return [matrix_derivative(jac[i]) for i in range(model.n_bodies)]


@jax.jit
def _autodiff_D2(model, q):
    hes = jax.jacfwd(jax.jacfwd(lambda x: seed.B_matrices(model, x)))(q)  # (nb, 4, 4, nq, nq)
    nq = model.nq
    # D'[(r nq + a) nq + b, c] = d²B_rc/dq_a dq_b
    return [jnp.transpose(hes[i], (0, 2, 3, 1)).reshape(4 * nq * nq, 4) for i in range(model.n_bodies)]


def _close(a, b, tol=TOL):
    scale = max(float(np.max(np.abs(b))), 1.0)
    np.testing.assert_allclose(a, b, rtol=0, atol=tol * scale)


@pytest.mark.parametrize("name", list(MODELS))
def test_D_recursion_and_closed_form_equal_autodiff(name):
    model = MODELS[name]
    q = random_state(model, 1)[0]
    ref = _autodiff_D(model, q)
    for d_rec, d_closed, d_ad in zip(D_recursive(model, q), D_closed_form(model, q), ref):
        _close(d_rec, d_ad)
        _close(d_closed, d_ad)


@pytest.mark.parametrize("name", ["double_pendulum", "knee_like_tree"])
def test_D2_recursion_and_closed_form_equal_autodiff(name):
    model = MODELS[name]
    q = random_state(model, 2)[0]
    ref = _autodiff_D2(model, q)
    for d_rec, d_closed, d_ad in zip(D2_recursive(model, q), D2_closed_form(model, q), ref):
        _close(d_rec, d_ad)
        _close(d_closed, d_ad)


def test_printed_eq_88_is_wrong_for_a_non_root_joint():
    """Erratum: Eq. 88 writes W_iiᵀ ⊗ I ⊗ ∇f_i where (Â_iᵀ pr(i)_i A4ᵀ) ⊗ I ⊗ ∇f_i is right."""
    model = mb.models.planar_chain(3)
    q = jnp.array([0.4, -0.3, 0.9])
    local, poses, hats = seed._frames(model, q)
    grads = mb.joint_gradients(model, q)
    d1 = D_recursive(model, q)
    i, p = 2, 1
    g = grads[i][:, None]
    eye = jnp.eye(model.nq)
    printed = jnp.kron(jnp.kron(hats[i].T @ poses[i].T, eye), g) @ d1[p]
    corrected = jnp.kron(jnp.kron(hats[i].T @ local[i].T, eye), g) @ d1[p]
    assert np.max(np.abs(printed - corrected)) > 1e-2


@pytest.mark.parametrize("name", ["three_link_arm_spring", "knee_like_tree"])
def test_point_velocity_and_acceleration_by_seed_formulas(name):
    """Eq. 44: v = D_iᵀ (r̄ ⊗ q'); Eq. 57: a = D'_iᵀ (r̄ ⊗ q'^[2]) + D_iᵀ (r̄ ⊗ q'')."""
    model = MODELS[name]
    q, qd, qdd = random_state(model, 3)
    point = jnp.array([0.05, -0.2, 0.1])
    body = model.n_bodies - 1
    rbar = jnp.concatenate([point, jnp.ones(1)])
    d = D_closed_form(model, q)[body]
    d2 = D2_closed_form(model, q)[body]
    v_seed = d.T @ jnp.kron(rbar, qd)
    a_seed = d2.T @ jnp.kron(rbar, jnp.kron(qd, qd)) + d.T @ jnp.kron(rbar, qdd)
    _close(v_seed[:3], mb.point_velocity(model, q, qd, body, point))
    _close(a_seed[:3], mb.point_acceleration(model, q, qd, qdd, body, point))
    assert abs(float(v_seed[3])) < 1e-14 and abs(float(a_seed[3])) < 1e-14


def test_double_pendulum_positions():
    model = mb.models.double_pendulum(l1=1.0, l2=0.5)
    q = jnp.array([0.3, -1.1])
    tip = mb.point_position(model, q, "rod2", (0.0, -0.5, 0.0))
    expected = [np.sin(0.3) + 0.5 * np.sin(-1.1), -np.cos(0.3) - 0.5 * np.cos(-1.1), 0.0]
    np.testing.assert_allclose(tip, expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(mb.joint_values(model, q), [0.3, -1.4], atol=1e-15)


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
