"""Each erratum in docs/errata.md has a test showing the printed form is wrong and the
correction right (the corrections in other test files are exercised there)."""

import jax
import jax.numpy as jnp
import numpy as np

import jaxmb as mb
from jaxmb import matrix_calculus
from models_for_tests import knee_like_tree


def _arm():
    return mb.models.three_link_arm((0.3, 0.25, 0.2), (0.12, 0.1, 0.08), (2.0, 1.0, 0.5), (0.02, 0.01, 0.002))


STATE = (jnp.array([0.4, 0.7, -0.5]), jnp.array([1.3, -0.8, 2.1]), jnp.array([0.5, -1.5, 0.9]))


def test_cesari_2001_eq_10_forearm_vertical_acceleration():
    """Eq. 10 prints -[l1 sin a1 - d2 sin(a1+a2)] a1'^2 + d2 sin(a1+a2)(2 a1' a2' + a2'^2);
    both signs inside are wrong: -[l1 sin a1 + d2 sin(a1+a2)] a1'^2 - d2 sin(...)(...)."""
    model = _arm()
    (a1, a2, _), (w1, w2, _), (b1, b2, _) = (np.asarray(x) for x in STATE)
    l1, d2 = 0.3, 0.1
    exact = mb.point_acceleration(model, *STATE, "forearm", (d2, 0.0, 0.0))[1]
    common = (l1 * np.cos(a1) + d2 * np.cos(a1 + a2)) * b1 + d2 * np.cos(a1 + a2) * b2
    printed = common - (l1 * np.sin(a1) - d2 * np.sin(a1 + a2)) * w1**2 + d2 * np.sin(a1 + a2) * (2 * w1 * w2 + w2**2)
    fixed = common - (l1 * np.sin(a1) + d2 * np.sin(a1 + a2)) * w1**2 - d2 * np.sin(a1 + a2) * (2 * w1 * w2 + w2**2)
    np.testing.assert_allclose(fixed, exact, rtol=1e-13)
    assert abs(printed - exact) > 1e-2


def test_cesari_2001_eq_14_hand_vertical_acceleration():
    """Eq. 14 prints d3 cos(a1+a2+a3) in the 2 a1' a2' term; it is d3 sin(a1+a2+a3)."""
    model = _arm()
    (a1, a2, a3), (w1, w2, w3), (b1, b2, b3) = (np.asarray(x) for x in STATE)
    l1, l2, d3 = 0.3, 0.25, 0.08
    s1, s12, s123 = np.sin(a1), np.sin(a1 + a2), np.sin(a1 + a2 + a3)
    c1, c12, c123 = np.cos(a1), np.cos(a1 + a2), np.cos(a1 + a2 + a3)
    exact = mb.point_acceleration(model, *STATE, "hand", (d3, 0.0, 0.0))[1]

    def eq14(coupling):
        return ((l1 * c1 + l2 * c12 + d3 * c123) * b1 + (l2 * c12 + d3 * c123) * b2 + d3 * c123 * b3
                - (l1 * s1 + l2 * s12 + d3 * s123) * w1**2 - (l2 * s12 + d3 * s123) * w2**2 - d3 * s123 * w3**2
                - (l2 * s12 + d3 * coupling) * 2 * w1 * w2 - d3 * s123 * (2 * w1 * w3 + 2 * w2 * w3))

    np.testing.assert_allclose(eq14(s123), exact, rtol=1e-13)
    assert abs(eq14(c123) - exact) > 1e-3


def test_ehsani_2016_eq_131_needs_the_second_moment_not_the_inertia_tensor():
    """Eq. 131 names the upper-left block of J_i 'the moment of inertia tensor at p'; only
    the second moment ∫ r rᵀ dm = m c cᵀ + ½ tr(I_c) 1 - I_c reproduces M."""
    model = knee_like_tree()  # 3-D: for planar motion the two happen to agree
    q = jnp.array([0.3, -0.4, 0.6])
    ds = matrix_calculus.D_closed_form(model, q)
    right = sum(matrix_calculus.body_mass_matrix(b, ds[i], 3) for i, b in enumerate(model.bodies))

    def printed_j(body):
        m, c = body.mass, body.com
        inertia_at_origin = body.inertia + m * (jnp.dot(c, c) * jnp.eye(3) - jnp.outer(c, c))
        top = jnp.concatenate([inertia_at_origin, (m * c)[:, None]], axis=1)
        return jnp.concatenate([top, jnp.concatenate([m * c, m[None]])[None, :]], axis=0)

    wrong = sum(matrix_calculus._kron_sandwich(printed_j(b), ds[i], ds[i], 3) for i, b in enumerate(model.bodies))
    np.testing.assert_allclose(right, mb.mass_matrix(model, q), rtol=1e-11, atol=1e-13)
    assert np.max(np.abs(wrong - right)) > 1e-2


def test_ehsani_2016_definition_1_shape_is_mr_by_n():
    """Definition 1 says ∂A/∂q ∈ R^{m x n}; it is (m r) x n (D_i is 4 nq x 4, Eq. 49)."""
    model = mb.models.planar_chain(3)
    assert matrix_calculus.D_closed_form(model, jnp.zeros(3))[0].shape == (4 * 3, 4)
    assert jax.jacfwd(lambda x: matrix_calculus.D_closed_form(model, x)[2])(jnp.zeros(3)).shape == (12, 4, 3)


def test_ehsani_2016_eq_200_is_inverse_dynamics_with_N_qdot():
    """Eq. 200 prints the right-hand side G - N; with N the matrix of Eq. 198 it is
    G - N q': the block system then gives tau = inverse dynamics at Q_d (Eq. 201)."""
    model = _arm()
    q, qd, qdd_des = STATE
    k = jnp.array([100.0, 100.0, 1000.0])
    e, ed = jnp.array([1e-3, -2e-3, 5e-4]), jnp.array([0.01, 0.02, -0.03])
    qdes, qddes = q + e, qd + ed
    q_d = qdd_des - 2 * k * (qd - qddes) - k**2 * (q - qdes)  # Eq. 201
    m = mb.mass_matrix(model, q)
    n_qd = mb.velocity_forces(model, q, qd)  # N(q, q') q'
    g = mb.gravity_forces(model, q)
    eye, zero = jnp.eye(3), jnp.zeros((3, 3))
    x = jnp.linalg.solve(jnp.block([[m, -eye], [eye, zero]]), jnp.concatenate([g - n_qd, q_d]))
    np.testing.assert_allclose(x[:3], q_d, rtol=1e-12)
    np.testing.assert_allclose(x[3:], mb.inverse_dynamics(model, q, qd, q_d), rtol=1e-12)
    assert float(jnp.linalg.norm(n_qd)) > 1e-2  # the velocity term is not negligible here
