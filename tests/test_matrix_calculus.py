"""Ehsani (2016), section 2: Definition 1 and Theorems 1-4, checked with jax.jacfwd on random
matrix-valued functions, and Eq. 39 (Rodrigues) against the matrix exponential."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.linalg import expm

from jaxmb._spatial import commutation, matrix_derivative, rotation_about_axis, skew  # private math (no public API)

TOL = 1e-12
R = 3  # size of q


def _random_matrix_function(key, m, n):
    """A smooth nonlinear A(q): (m, n) built from random coefficients."""
    k1, k2, k3 = jax.random.split(key, 3)
    c0 = jax.random.normal(k1, (m, n))
    c1 = jax.random.normal(k2, (m, n, R))
    c2 = jax.random.normal(k3, (m, n, R))
    return lambda q: c0 + jnp.sin(c1 @ q) + jnp.cos(c2 @ q) * (q @ q)


def _d(fun, q):
    """Definition 1, Eq. 3: the (m r) x n matrix of dA_ik/dq blocks."""
    return matrix_derivative(jax.jacfwd(fun)(q))


@pytest.fixture
def q():
    return jax.random.normal(jax.random.PRNGKey(7), (R,))


def test_definition_1_layout(q):
    a = _random_matrix_function(jax.random.PRNGKey(0), 2, 3)
    d = _d(a, q)
    jac = jax.jacfwd(a)(q)
    assert d.shape == (2 * R, 3)
    for i in range(2):
        for k in range(3):
            np.testing.assert_allclose(d[i * R:(i + 1) * R, k], jac[i, k, :], rtol=0, atol=TOL)


def test_theorem_1_product(q):
    """∂(AB)/∂q = ∂A/∂q B + (A ⊗ I_r) ∂B/∂q (Eq. 4)."""
    a = _random_matrix_function(jax.random.PRNGKey(1), 2, 3)
    b = _random_matrix_function(jax.random.PRNGKey(2), 3, 4)
    lhs = _d(lambda x: a(x) @ b(x), q)
    rhs = _d(a, q) @ b(q) + jnp.kron(a(q), jnp.eye(R)) @ _d(b, q)
    np.testing.assert_allclose(lhs, rhs, rtol=0, atol=TOL * np.max(np.abs(lhs)))


def test_theorem_2_scalar_product(q):
    """∂(aA)/∂q = A ⊗ ∂a/∂q + a ∂A/∂q (Eq. 11)."""
    a_mat = _random_matrix_function(jax.random.PRNGKey(3), 3, 2)
    scalar = lambda x: jnp.sin(x[0]) * x[1] + x[2] ** 3  # noqa: E731
    lhs = _d(lambda x: scalar(x) * a_mat(x), q)
    rhs = jnp.kron(a_mat(q), jax.grad(scalar)(q)[:, None]) + scalar(q) * _d(a_mat, q)
    np.testing.assert_allclose(lhs, rhs, rtol=0, atol=TOL * np.max(np.abs(lhs)))


def test_theorem_3_kronecker(q):
    """∂(A ⊗ C)/∂q = (I_m ⊗ U_{s,r})(∂A/∂q ⊗ C) + A ⊗ ∂C/∂q (Eq. 14)."""
    m, n, s, p = 2, 3, 2, 2
    a = _random_matrix_function(jax.random.PRNGKey(4), m, n)
    c = _random_matrix_function(jax.random.PRNGKey(5), s, p)
    lhs = _d(lambda x: jnp.kron(a(x), c(x)), q)
    rhs = jnp.kron(jnp.eye(m), commutation(s, R)) @ jnp.kron(_d(a, q), c(q)) + jnp.kron(a(q), _d(c, q))
    np.testing.assert_allclose(lhs, rhs, rtol=0, atol=TOL * np.max(np.abs(lhs)))


def test_theorem_3_fails_without_commutation(q):
    """The U_{s,r} factor matters: dropping it gives a different matrix (the test can fail)."""
    a = _random_matrix_function(jax.random.PRNGKey(4), 2, 3)
    c = _random_matrix_function(jax.random.PRNGKey(5), 2, 2)
    lhs = _d(lambda x: jnp.kron(a(x), c(x)), q)
    wrong = jnp.kron(_d(a, q), c(q)) + jnp.kron(a(q), _d(c, q))
    assert np.max(np.abs(lhs - wrong)) > 1e-3


def test_theorem_4_differentials(q):
    """dA = (I_m ⊗ dqᵀ) ∂A/∂q (Eq. 27) and dA = (∂Aᵀ/∂q)ᵀ (I_n ⊗ dq) (Eq. 28)."""
    m, n = 3, 2
    a = _random_matrix_function(jax.random.PRNGKey(6), m, n)
    dq = jax.random.normal(jax.random.PRNGKey(8), (R,))
    exact = jax.jvp(a, (q,), (dq,))[1]
    part_a = jnp.kron(jnp.eye(m), dq[None, :]) @ _d(a, q)
    part_b = _d(lambda x: a(x).T, q).T @ jnp.kron(jnp.eye(n), dq[:, None])
    np.testing.assert_allclose(part_a, exact, rtol=0, atol=TOL * np.max(np.abs(exact)))
    np.testing.assert_allclose(part_b, exact, rtol=0, atol=TOL * np.max(np.abs(exact)))


def test_commutation_matrix_swaps_kronecker_factors():
    """U_{s,m}(A ⊗ B)U_{n,t} = B ⊗ A for A (m x n), B (s x t)."""
    a = jax.random.normal(jax.random.PRNGKey(0), (2, 3))
    b = jax.random.normal(jax.random.PRNGKey(1), (4, 5))
    lhs = commutation(4, 2) @ jnp.kron(a, b) @ commutation(3, 5)
    np.testing.assert_allclose(lhs, jnp.kron(b, a), rtol=0, atol=1e-14)


@pytest.mark.parametrize("angle", [0.0, 0.3, -2.1, 3.0])
def test_rodrigues_equals_matrix_exponential(angle):
    """Eq. 39: I + ṽ sin θ + 2 ṽ² sin²(θ/2) = exp(θ ṽ)."""
    axis = jnp.array([0.3, -0.5, 0.8])
    axis = axis / jnp.linalg.norm(axis)
    np.testing.assert_allclose(rotation_about_axis(axis, angle), expm(angle * skew(axis)), rtol=0, atol=1e-14)
