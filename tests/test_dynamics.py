"""M(q), N(q, q')q', G(q) by three independent routes, against the seeds' closed forms,
and the forward/inverse dynamics identities."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jaxmb as mb
from assertions import assert_tree_allclose
from models_for_tests import all_models, random_state

MODELS = all_models()
SEED_ROUTE_MODELS = ["double_pendulum", "three_link_arm_spring", "planar_chain_4", "knee_like_tree", "walker_knee"]
TOL = 1e-10  # norm-wise relative agreement of routes (float64, exact maths)

# Jitted entry points: one compilation per (model structure, method) instead of slow
# op-by-op dispatch. The seed route stays eager (its Kronecker graph compiles slowly).
_jit = lambda f: jax.jit(f, static_argnames="method")  # noqa: E731
mass_matrix = _jit(mb.mass_matrix)
velocity_forces = _jit(mb.velocity_forces)
gravity_forces = _jit(mb.gravity_forces)
bias_forces = _jit(mb.bias_forces)
forward_dynamics = _jit(mb.forward_dynamics)
inverse_dynamics = _jit(mb.inverse_dynamics)


@jax.jit
def _both_routes(model, q, qd):
    """All quantities by both routes in one compilation (the suite is compile-bound)."""
    out = {}
    for method in ("recursive", "autodiff"):
        out[method] = (mb.mass_matrix(model, q, method=method), mb.velocity_forces(model, q, qd, method=method),
                       mb.gravity_forces(model, q, method=method), mb.bias_forces(model, q, qd, method=method))
    return out


@pytest.mark.parametrize("name", list(MODELS))
def test_recursive_and_autodiff_routes_agree(name):
    model = MODELS[name]
    for seed in range(3):
        q, qd, _ = random_state(model, seed)
        out = _both_routes(model, q, qd)
        assert_tree_allclose(out["recursive"], out["autodiff"], rtol=TOL, normwise=True)


@pytest.mark.parametrize("name", SEED_ROUTE_MODELS)
def test_seed_route_agrees_with_recursive(name):
    """Eq. 145 (as printed), Eq. 147 (corrected: D_i Ḋ_iᵀ) and Eq. 187."""
    model = MODELS[name]
    q, qd, _ = random_state(model, 11)
    assert_tree_allclose(mb.mass_matrix(model, q, method="matrix_calculus"), mass_matrix(model, q), rtol=TOL, normwise=True)
    assert_tree_allclose(mb.velocity_forces(model, q, qd, method="matrix_calculus"), velocity_forces(model, q, qd), rtol=TOL, normwise=True)
    assert_tree_allclose(mb.gravity_forces(model, q, method="matrix_calculus"), gravity_forces(model, q), rtol=TOL, normwise=True)


def test_printed_eq_147_is_wrong():
    """Erratum: Eq. 147 repeats Eq. 145 (D_i D_iᵀ), which would give N = M."""
    model = MODELS["double_pendulum"]
    q, qd, _ = random_state(model, 3)
    ds = mb.matrix_calculus.D_closed_form(model, q)
    printed = sum(mb.matrix_calculus.body_mass_matrix(b, ds[i], model.nq) for i, b in enumerate(model.bodies)) @ qd
    assert np.max(np.abs(printed - velocity_forces(model, q, qd))) > 0.1


def test_double_pendulum_matches_seed_000():
    """Seed 000's matrices, with the gravity erratum of its code fixed (m2 g l1, not m2 g l2)."""
    m1, l1, m2, l2, g = 1.3, 0.9, 0.7, 0.6, 9.81
    model = mb.models.double_pendulum(m1, l1, m2, l2, g)
    q, qd, _ = random_state(model, 5)
    (t1, t2), (w1, w2) = np.asarray(q), np.asarray(qd)
    c, s = np.cos(t1 - t2), np.sin(t1 - t2)
    m = np.array([[m1 * l1**2 / 3 + m2 * l1**2, m2 * l1 * l2 / 2 * c], [m2 * l1 * l2 / 2 * c, m2 * l2**2 / 3]])
    cvec = np.array([-m2 * l1 * l2 / 2 * w2**2 * s, m2 * l1 * l2 / 2 * w1**2 * s])
    gvec = np.array([-m1 * g * l1 / 2 * np.sin(t1) - m2 * g * l1 * np.sin(t1), -m2 * g * l2 / 2 * np.sin(t2)])
    assert_tree_allclose(mass_matrix(model, q), m, rtol=TOL, normwise=True)
    assert_tree_allclose(gravity_forces(model, q), gvec, rtol=TOL, normwise=True)
    assert_tree_allclose(velocity_forces(model, q, qd), -cvec, rtol=TOL, normwise=True)  # seed: M q'' = C + G + Q
    code_gravity = -m1 * g * l1 / 2 * np.sin(t1) - m2 * g * l2 * np.sin(t1)  # as printed in the code
    assert abs(code_gravity - gvec[0]) > 1e-2
    tau = mb.models.double_pendulum_torques(0.4, -0.2)
    assert_tree_allclose(forward_dynamics(model, q, qd, tau), np.linalg.solve(m, cvec + gvec + np.array([0.6, -0.2])), rtol=TOL, normwise=True)


def _seed_002(l, d, m, inertia, g, fs, ds, a, ad):
    """Seed 002, Eq. 27-44, with its errata corrected (see docs/errata.md)."""
    l1, l2, _ = l
    d1, d2, d3 = d
    m1, m2, m3 = m
    i1, i2, i3 = inertia
    a1, a2, a3 = a
    w1, w2, w3 = ad
    c2, c3, c23 = np.cos(a2), np.cos(a3), np.cos(a2 + a3)
    s2, s3, s23 = np.sin(a2), np.sin(a3), np.sin(a2 + a3)
    m11 = (m1 * d1**2 + i1 + m2 * (l1**2 + d2**2 + 2 * l1 * d2 * c2) + i2
           + m3 * (l1**2 + l2**2 + d3**2 + 2 * l1 * l2 * c2 + 2 * l1 * d3 * c23 + 2 * l2 * d3 * c3) + i3)
    m12 = m2 * (d2**2 + l1 * d2 * c2) + i2 + m3 * (l2**2 + d3**2 + l1 * l2 * c2 + l1 * d3 * c23 + 2 * l2 * d3 * c3) + i3
    m13 = m3 * (d3**2 + l1 * d3 * c23 + l2 * d3 * c3) + i3
    m22 = m2 * d2**2 + i2 + m3 * (l2**2 + d3**2 + 2 * l2 * d3 * c3) + i3  # Eq. 31 prints l2 d3 cos(a3)
    m23 = m3 * (d3**2 + l2 * d3 * c3) + i3
    m33 = m3 * d3**2 + i3
    mm = np.array([[m11, m12, m13], [m12, m22, m23], [m13, m23, m33]])
    v1 = (-((m2 * l1 * d2 + m3 * l1 * l2) * s2 + m3 * l1 * d3 * s23) * (2 * w1 * w2 + w2**2)
          - (m3 * l1 * d3 * s23 + m3 * l2 * d3 * s3) * (2 * w1 * w3 + 2 * w2 * w3 + w3**2))
    v2 = (((m3 * l1 * l2 + m2 * d2 * l1) * s2 + m3 * d3 * l1 * s23) * w1**2
          - m3 * d3 * l2 * s3 * (2 * w1 * w3 + 2 * w2 * w3 + w3**2))
    v3 = (m3 * l1 * d3 * s23 + m3 * l2 * d3 * s3) * w1**2 + m3 * l2 * d3 * s3 * (2 * w1 * w2 + w2**2)
    c1, c12, c123 = np.cos(a1), np.cos(a1 + a2), np.cos(a1 + a2 + a3)
    sn1, sn12, sn123 = np.sin(a1), np.sin(a1 + a2), np.sin(a1 + a2 + a3)
    g1 = m1 * g * d1 * c1 + m2 * g * (l1 * c1 + d2 * c12) + m3 * g * (l1 * c1 + l2 * c12 + d3 * c123)
    g2 = m2 * g * d2 * c12 + m3 * g * (l2 * c12 + d3 * c123)
    g3 = m3 * g * d3 * c123
    t1 = -fs * l1 * sn1 - fs * l2 * sn12 - fs * (d3 + ds) * sn123
    t2 = -fs * l2 * sn12 - fs * (d3 + ds) * sn123
    t3 = -fs * (d3 + ds) * sn123
    return mm, np.array([v1, v2, v3]), np.array([g1, g2, g3]), np.array([t1, t2, t3])


def test_three_link_arm_matches_seed_002():
    l, d, m, inertia = (0.31, 0.27, 0.18), (0.14, 0.12, 0.06), (2.0, 1.2, 0.5), (0.016, 0.009, 0.002)
    fs, ds = 15.0, 0.04
    model = mb.models.three_link_arm(l, d, m, inertia, 9.81, fs, ds)
    q, qd, qdd = random_state(model, 9)
    mm, v, g, text = _seed_002(l, d, m, inertia, 9.81, fs, ds, np.asarray(q), np.asarray(qd))
    terms = jax.jit(mb.inverse_dynamics_terms)(model, q, qd, qdd)
    assert_tree_allclose(mass_matrix(model, q), mm, rtol=TOL, normwise=True)
    assert_tree_allclose(terms.velocity, v, rtol=TOL, normwise=True)
    assert_tree_allclose(terms.gravity, g, rtol=TOL, normwise=True)
    assert_tree_allclose(terms.external, text, rtol=TOL, normwise=True)
    assert_tree_allclose(terms.total, mm @ np.asarray(qdd) + v + g + text, rtol=TOL, normwise=True)
    assert_tree_allclose(inverse_dynamics(model, q, qd, qdd), terms.total, rtol=TOL, normwise=True)
    printed_m22 = m[1] * d[1] ** 2 + inertia[1] + m[2] * (l[1] ** 2 + d[2] ** 2 + l[1] * d[2] * np.cos(q[2])) + inertia[2]
    assert abs(printed_m22 - mm[1, 1]) > 1e-3


@jax.jit
def _round_trips(model, q, qd, qdd, tau):
    """Each way round twice: within the recursive route (RNEA against CRBA and a
    Cholesky solve), and across routes (the recursive inverse against the autodiff
    forward dynamics and back), so neither direction is checked only against itself."""
    out = []
    tau_id = mb.inverse_dynamics(model, q, qd, qdd)
    qdd_fd = mb.forward_dynamics(model, q, qd, tau)
    for method in ("recursive", "autodiff"):
        qdd_back = mb.forward_dynamics(model, q, qd, tau_id, method=method)
        tau_back = mb.inverse_dynamics(model, q, qd, qdd_fd, method=method)
        out.append((qdd_back, tau_back))
    return out


@pytest.mark.parametrize("name", list(MODELS))
def test_inverse_and_forward_dynamics_are_inverses(name):
    model = MODELS[name]
    q, qd, qdd = random_state(model, 21)
    tau = jnp.asarray(np.random.default_rng(1).normal(size=model.nq))
    assert_tree_allclose(_round_trips(model, q, qd, qdd, tau), [(qdd, tau)] * 2, rtol=TOL, normwise=True)


@pytest.mark.parametrize("name", list(MODELS))
def test_energy_identities(name):
    """T = ½ q'ᵀ M q' (T from body velocities); G = -∂V/∂q; M symmetric positive definite."""
    model = MODELS[name]
    q, qd, _ = random_state(model, 31)
    m = mass_matrix(model, q)
    assert_tree_allclose(jax.jit(mb.kinetic_energy)(model, q, qd), 0.5 * qd @ m @ qd, rtol=TOL, normwise=True)
    assert_tree_allclose(gravity_forces(model, q), -jax.jit(jax.grad(mb.potential_energy, argnums=1))(model, q), rtol=TOL, normwise=True)
    np.testing.assert_allclose(m, m.T, atol=1e-14 * float(np.max(np.abs(m))))
    assert float(jnp.min(jnp.linalg.eigvalsh(m))) > 0.0


def test_spring_generalized_force_is_minus_t_ext():
    model = mb.models.three_link_arm(spring_force=10.0, spring_distance=0.05)
    q = jnp.array([0.2, 0.5, -0.3])
    assert_tree_allclose(mb.generalized_forces(model, q), -mb.inverse_dynamics_terms(model, q, q * 0, q * 0).external, rtol=TOL, normwise=True)
    torque = mb.BodyTorque("forearm", (0.0, 0.0, 2.0))
    np.testing.assert_allclose(mb.generalized_forces(model, q, [torque]), [2.0, 2.0, 0.0], atol=1e-14)


def test_inverse_dynamics_over_time_series():
    model = mb.models.three_link_arm(spring_force=5.0)
    t = jnp.linspace(0.0, 1.0, 50)
    q = jnp.stack([0.5 * jnp.sin(t), 0.3 + t, -0.2 * t**2], axis=1)
    qd = jnp.stack([0.5 * jnp.cos(t), jnp.ones_like(t), -0.4 * t], axis=1)
    qdd = jnp.stack([-0.5 * jnp.sin(t), jnp.zeros_like(t), -0.4 * jnp.ones_like(t)], axis=1)
    terms = jax.jit(mb.inverse_dynamics_series)(model, q, qd, qdd)
    assert terms.total.shape == (50, 3)
    k = 17
    assert_tree_allclose(terms.total[k], inverse_dynamics(model, q[k], qd[k], qdd[k]), rtol=TOL, normwise=True)
    assert_tree_allclose(terms.total, terms.inertial + terms.velocity + terms.gravity + terms.external, rtol=TOL, normwise=True)


def test_gradients_of_dynamics():
    """check_grads (forward and reverse mode, 2nd order) on M, bias and qdd, w.r.t. q and masses."""
    model = MODELS["knee_like_tree"]
    q, qd, _ = random_state(model, 41)
    check_grads(jax.jit(lambda x: mass_matrix(model, x)), (q,), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)
    arm = MODELS["three_link_arm_spring"]
    check_grads(jax.jit(lambda x: mass_matrix(arm, x)), (q,), order=2, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)
    check_grads(jax.jit(lambda x, v: bias_forces(model, x, v)), (q, qd), order=1, modes=("fwd", "rev"),
                atol=1e-6, rtol=1e-6)
    masses = jnp.stack([b.mass for b in model.bodies])

    def qdd_of_masses(ms):
        bodies = tuple(eqx_tree_replace_mass(b, ms[i]) for i, b in enumerate(model.bodies))
        return forward_dynamics(model_with_bodies(model, bodies), q, qd)

    check_grads(jax.jit(qdd_of_masses), (masses,), order=1, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)


def eqx_tree_replace_mass(body, mass):
    import equinox as eqx

    return eqx.tree_at(lambda b: b.mass, body, mass)


def model_with_bodies(model, bodies):
    import equinox as eqx

    return eqx.tree_at(lambda m: m.bodies, model, bodies)


def test_float32_on_request():
    """The library follows the dtype of the model and state: float32 in, float32 out."""
    model = MODELS["planar_chain_4"]
    q, qd, _ = random_state(model, 51)
    model32 = jax.tree.map(lambda x: x.astype(jnp.float32) if jnp.issubdtype(x.dtype, jnp.floating) else x, model)
    qdd32 = forward_dynamics(model32, q.astype(jnp.float32), qd.astype(jnp.float32))
    assert qdd32.dtype == jnp.float32
    np.testing.assert_allclose(qdd32, forward_dynamics(model, q, qd), rtol=2e-4, atol=2e-4)


def test_unknown_method_is_rejected():
    # ValueError from jaxmb; in this suite the run-time type checker (a TypeError) may see it first.
    with pytest.raises((ValueError, TypeError), match="method"):
        mass_matrix(MODELS["double_pendulum"], jnp.zeros(2), method="magic")


# -- the projected (level-parallel) route and joint-space loads -------------------

from jaxmb import _dynamics  # noqa: E402  (private: the route's choice, patched to compare derivatives)
from jaxmb import _rigid_body as _dyn  # noqa: E402  (private: the projected pass's two forms, compared)


@functools.partial(jax.jit, static_argnames="unroll")
def _projected_and_crba(model, q, qd, unroll):
    f, fd, fdd = mb.joint_rates(model, q, qd)
    jac = mb.joint_gradients(model, q)
    by_level = _dyn._projected_terms_by_level(model, f, fd, fdd, jac)
    unrolled = _dyn._projected_terms_unrolled(model, f, fd, fdd, jac) if unroll else None
    m_c = jac.T @ _dyn._joint_space_crba(model, f) @ jac
    b_c = jac.T @ _dyn._joint_space_rnea(model, f, fd, fdd)
    return by_level, unrolled, m_c, b_c


@pytest.mark.parametrize("name", list(MODELS) + ["andrews_squeezer"])
def test_projected_route_equals_joint_space_crba_and_rnea(name):
    """M_q = Σ J_iᵀ I_i J_i and bias_q = Σ J_iᵀ(I a + v ×* I v), by one forward pass over
    the tree, equal Jᵀ M_f J and Jᵀ RNEA(f, f', q'ᵀHq') (the route forward_dynamics
    takes for nq much smaller than the number of bodies), in both of its forms: level by
    level on arrays, and unrolled into scalars (the form small models use), which also
    agree on the bodies' Jacobians that the loads read."""
    if name == "andrews_squeezer":
        model = mb.models.andrews_squeezer()
        q, qd = jnp.asarray([0.4]), jnp.asarray([-3.0])
    else:
        model = MODELS[name]
        q, qd, _ = random_state(model, 3)
    # The unrolled form on models up to one coordinate past where it is used (its
    # compile time grows fast with nq: a minute for the 11-coordinate ball_and_free).
    by_level, unrolled, m_c, b_c = _projected_and_crba(model, q, qd, unroll=model.nq <= 4)
    for m_p, b_p, _ in (by_level,) if unrolled is None else (by_level, unrolled):
        assert_tree_allclose((m_p, b_p), (m_c, b_c), rtol=1e-12, normwise=True)
    if unrolled is not None:
        assert_tree_allclose(unrolled[2][0], by_level[2][0], rtol=1e-12, normwise=True)


def test_every_call_takes_the_route_the_model_picks(monkeypatch):
    """The static choice of the recursive route (closed chains and coupled joints, few
    coordinates per body: the projected pass; trees with f = q: the joint-space pair),
    and of the projected pass's form (small models: unrolled), on the models it was
    measured on; every public call of a model takes its model's route (the other route,
    patched to fail, is never called); and on a projecting model M q'' + bias from the
    public calls equals the projected pass's and forward_dynamics inverts it."""
    andrews = mb.models.andrews_squeezer()
    assert _dyn._coordinate_pattern(andrews) == ((0,),) * 7  # every angle a function of the crank's
    tree = mb.constraints.dae_vector_field(andrews).tree
    assert sorted(map(len, _dyn._coordinate_pattern(tree))) == [1, 1, 1, 1, 2, 2, 2]  # f = q, depth 2
    assert _dyn._coordinate_pattern(mb.models.planar_chain(4)) == ((0,), (0, 1), (0, 1, 2), (0, 1, 2, 3))
    for model in (andrews, mb.models.four_bar()):
        assert _dyn._projects(model) and _dyn._unrolls(model)
    for model in (tree, mb.models.five_bar(), mb.models.three_link_arm(), mb.models.planar_chain(4),
                  mb.models.planar_chain(7)):
        assert not _dyn._projects(model)
    assert not _dyn._unrolls(mb.models.planar_chain(5)) and not _dyn._unrolls(mb.models.planar_chain(7))

    def refuse(*args, **kwargs):
        raise AssertionError("the route this model does not take was called")

    def public_calls(model):  # eager, so that the patched names are looked up
        q = jnp.linspace(0.2, 0.4, model.nq)
        for call in (lambda: mb.mass_matrix(model, q), lambda: mb.bias_forces(model, q, q),
                     lambda: mb.gravity_forces(model, q), lambda: mb.velocity_forces(model, q, q),
                     lambda: mb.inverse_dynamics(model, q, q, q), lambda: mb.forward_dynamics(model, q, q)):
            call()

    with monkeypatch.context() as patch:
        for name in ("_joint_space_crba", "_joint_space_rnea", "_joint_space_terms"):
            patch.setattr(_dynamics, name, refuse)
        public_calls(andrews)
    with monkeypatch.context() as patch:
        patch.setattr(_dynamics, "_projected_terms", refuse)
        public_calls(mb.models.three_link_arm())

    q, qd, qdd = jnp.asarray([0.4]), jnp.asarray([-3.0]), jnp.asarray([2.5])
    f, fd, fdd = mb.joint_rates(andrews, q, qd)
    m_p, b_p, _ = _dyn._projected_terms_unrolled(andrews, f, fd, fdd, mb.joint_gradients(andrews, q))
    tau = inverse_dynamics(andrews, q, qd, qdd) + mb.generalized_forces(andrews, q)
    # Equal to the round-off of two differently fused programs.
    np.testing.assert_allclose(mass_matrix(andrews, q), m_p, rtol=1e-10)
    np.testing.assert_allclose(mb.bias_forces(andrews, q, qd), b_p, rtol=1e-10)
    np.testing.assert_allclose(tau, m_p @ qdd + b_p, rtol=1e-10)
    np.testing.assert_allclose(forward_dynamics(andrews, q, qd, inverse_dynamics(andrews, q, qd, qdd)), qdd, rtol=1e-10)


def test_unrolled_pass_differentiates_as_itself(monkeypatch):
    """Small models evaluate the unrolled pass but take its derivatives from the level-wise
    one (a custom JVP, so that jacfwd in implicit solvers and reverse mode stay fast).
    Those derivatives equal the unrolled pass's own: forward (the Jacobian of q'' in
    (q, q')) and reverse (the gradient of q'' with respect to the model's parameters), on
    Andrews' squeezer (seven bodies over one coordinate; the four-bar takes the same code)."""
    model = mb.models.andrews_squeezer()
    assert _dyn._projects(model) and _dyn._unrolls(model)
    q, qd = jnp.asarray([0.4]), jnp.asarray([-3.0])
    params, static = eqx.partition(model, eqx.is_array)
    tau = jnp.linspace(0.5, 1.5, model.nq)

    def derivatives():
        # The library's function, not this file's jitted one, whose cached trace would
        # keep the first derivatives.
        qdd = lambda p, x, xd: mb.forward_dynamics(eqx.combine(p, static), x, xd, tau)  # noqa: E731
        jac = jax.jit(jax.jacfwd(qdd, argnums=(1, 2)))(params, q, qd)
        grad = jax.jit(jax.grad(lambda p: jnp.sum(qdd(p, q, qd) ** 2)))(params)
        return jac, grad

    level_wise = derivatives()
    monkeypatch.setattr(_dynamics, "_projected_terms", _dyn._projected_terms_unrolled)  # differentiated as itself
    own = derivatives()
    leaves = jax.tree.leaves(level_wise)
    assert any(float(jnp.max(jnp.abs(x))) > 0.0 for x in leaves)
    for a, b in zip(leaves, jax.tree.leaves(own)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10 * max(1.0, float(jnp.max(jnp.abs(b)))))


def _loads_by_jacobians(model, q):
    """The loads' generalized forces by point/angular Jacobians in q (an independent route)."""
    total = jnp.zeros_like(q)
    for load in model.loads:
        if isinstance(load, mb.PointForce):
            total += mb.point_jacobian(model, q, load.body, load.point).T @ load.force
        elif isinstance(load, mb.BodyTorque):
            total += mb.angular_jacobians(model, q)[model.body_index(load.body)].T @ load.torque
        elif isinstance(load, mb.LinearSpring):
            total += -jax.grad(lambda x: load.potential_energy(model, x))(q)
    return total


def test_joint_space_loads_equal_jacobian_transpose_route():
    """Loads evaluated through their power in the joint variables, Q_k = P(f, J e_k),
    equal J_pᵀF, J_ωᵀτ and -∂V/∂q computed directly in q."""
    base = MODELS["knee_like_tree"]
    bodies = base.body_names
    loads = (mb.PointForce(bodies[-1], (0.1, -0.2, 0.05), (3.0, -1.0, 2.0)),
             mb.BodyTorque(bodies[2], (0.5, 0.2, -0.7)),
             mb.LinearSpring(bodies[-2], (0.02, 0.1, 0.0), (0.3, -0.4, 0.2), 250.0, 0.1))
    for model, q in ((eqx.tree_at(lambda m: m.loads, base, loads), random_state(base, 5)[0]),
                     (mb.models.andrews_squeezer(), jnp.asarray([1.1]))):
        got = jax.jit(mb.generalized_forces)(model, q)
        want = jax.jit(_loads_by_jacobians)(model, q)
        assert float(jnp.max(jnp.abs(want))) > 1e-3  # the loads do work here
        assert_tree_allclose(got, want, rtol=1e-11, normwise=True)
        # Each load alone, by its own generalized force and by its power per unit rate
        # of each coordinate (the base class's route, Q_k = P(f, J e_k)).
        f, jac = mb.joint_values(model, q), mb.joint_gradients(model, q)
        alone = sum(load.generalized_force(model, q) for load in model.loads)
        by_power = sum(mb.AbstractJointSpaceLoad.generalized_force_from_joints(load, model, f, jac)
                       for load in model.loads)
        assert_tree_allclose(alone, want, rtol=1e-11, normwise=True)
        assert_tree_allclose(by_power, want, rtol=1e-11, normwise=True)
        # forward_dynamics takes the loads through the projected pass's body Jacobians
        # (Andrews, nq << bodies) or the joint-space route (the tree): same accelerations.
        qd = jnp.ones_like(q) * 0.7
        bare = eqx.tree_at(lambda m: m.loads, model, ())
        assert_tree_allclose(forward_dynamics(model, q, qd), forward_dynamics(bare, q, qd, want), rtol=1e-11, normwise=True)

def test_eager_calls_trace_and_compile_once_per_model_structure():
    """Outside `jit`, `mass_matrix`, `gravity_forces`, `velocity_forces`, `bias_forces`,
    `forward_dynamics` and `inverse_dynamics` each compile one program per model structure (they used to run their passes operation
    by operation, tracing them again on every call: about a second per call on gait2354).
    A new state, or the same structure with other masses, traces and compiles nothing."""
    events = []

    def record(name, secs, **kw):
        events.append(name)

    model = mb.models.planar_chain(3)
    heavier = eqx.tree_at(lambda m: m.bodies[1].mass, model, 2.0 * model.bodies[1].mass)
    q, qd = jnp.array([0.1, 0.2, 0.3]), jnp.array([0.3, -0.2, 0.1])

    def calls(m, q):
        return (mb.mass_matrix(m, q), mb.bias_forces(m, q, qd), mb.forward_dynamics(m, q, qd),
                mb.inverse_dynamics(m, q, qd, qd), mb.gravity_forces(m, q), mb.velocity_forces(m, q, qd))

    first, moved = calls(model, q), q + 0.1
    jax.monitoring.register_event_duration_secs_listener(record)
    try:
        again, other = calls(model, moved), calls(heavier, q)
    finally:
        jax.monitoring.unregister_event_duration_listener(record)
    traced = [e for e in events if e.startswith("/jax/core/compile/")]
    assert traced == [], traced
    np.testing.assert_allclose(again[1], mb.bias_forces(model, moved, qd, method="autodiff"), rtol=1e-12)
    np.testing.assert_allclose(other[0], mb.mass_matrix(heavier, q, method="autodiff"), rtol=1e-12)
    np.testing.assert_allclose(other[4], mb.gravity_forces(heavier, q, method="autodiff"), rtol=1e-12)
    np.testing.assert_allclose(again[5], mb.velocity_forces(model, moved, qd, method="autodiff"), rtol=1e-12)
    assert not np.allclose(other[0], first[0])


# A batch larger than one chunk (jaxmb._batching.CHUNK = 128 states): a plain vmap runs
# in chunks on CPU.
_BATCH = 300



def _batched_state(n, batch, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(rng.uniform(-a, a, (batch, n))) for a in (np.pi, 2.0, 5.0))


def test_a_plain_vmap_over_many_states_runs_in_chunks():
    model = mb.models.planar_chain(2)
    q, qd, tau = _batched_state(2, _BATCH)
    calls = (
        lambda q, qd, tau: mb.forward_dynamics(model, q, qd, tau),
        lambda q, qd, tau: mb.inverse_dynamics(model, q, qd, tau),
        lambda q, qd, tau: mb.mass_matrix(model, q),
        lambda q, qd, tau: mb.bias_forces(model, q, qd),
    )
    for fn in calls:
        # Chunked (a scan over chunks) past one chunk, a single vectorised pass below it.
        assert "scan" in str(jax.make_jaxpr(jax.vmap(fn))(q, qd, tau))
        assert "scan" not in str(jax.make_jaxpr(jax.vmap(fn))(q[:64], qd[:64], tau[:64]))
    every = lambda *x: tuple(fn(*x) for fn in calls)  # noqa: E731
    # Same values as state by state (lax.map without batch_size: one state per step).
    assert_tree_allclose(jax.jit(jax.vmap(every))(q, qd, tau),
                         jax.jit(lambda *x: jax.lax.map(lambda s: every(*s), x))(q, qd, tau),
                         rtol=1e-12, atol=1e-12, normwise=True)


def test_derivatives_of_a_chunked_batch_are_those_of_its_states():
    model = mb.models.planar_chain(2)
    q, qd, tau = _batched_state(2, _BATCH, seed=1)
    fd = lambda model, s: mb.forward_dynamics(model, *s)  # noqa: E731

    def every(model, s):
        return (fd(model, s), mb.inverse_dynamics(model, *s), mb.mass_matrix(model, s[0]), mb.bias_forces(model, *s[:2]))

    def total(model, q):
        # The batch compiled on its own inside the derivative (as in `inverse_dynamics_motion`):
        # the tangent rule's batch axes must agree with the values' (all first).
        values = jax.jit(jax.vmap(lambda *x: every(model, x)))(q, qd, tau)
        return sum(jnp.sum(v ** 2 * w) for v, w in zip(values, weights))

    def total_state_by_state(model, q):
        values = jax.lax.map(lambda s: every(model, s), (q, qd, tau))
        return sum(jnp.sum(v ** 2 * w) for v, w in zip(values, weights))

    # Weights that tell the batch axis from the others (a sum of squares would not).
    shapes = jax.eval_shape(lambda: jax.vmap(lambda *x: every(model, x))(q, qd, tau))
    weights = [jnp.asarray(np.random.default_rng(2).uniform(0.5, 1.5, s.shape)) for s in shapes]

    # Reverse mode, with respect to the states (the model a constant of the batch), and
    # with respect to the model's parameters and the states.
    assert_tree_allclose(jax.grad(lambda q: total(model, q))(q), jax.grad(lambda q: total_state_by_state(model, q))(q),
                         rtol=1e-11, normwise=True)
    params, static = eqx.partition(model, eqx.is_array)
    by_params = lambda f: jax.jit(jax.grad(lambda p, q: f(eqx.combine(p, static), q), argnums=(0, 1)))  # noqa: E731
    grads, grads_one = by_params(total)(params, q), by_params(total_state_by_state)(params, q)
    # Norm-wise over the whole gradient as well: a translation of the root moves the whole
    # chain without changing its dynamics, so that leaf is round-off (in ground coordinates
    # the batch and the single states round differently).
    scale = max(float(jnp.max(jnp.abs(x))) for x in jax.tree.leaves(grads_one))
    assert_tree_allclose(grads, grads_one, rtol=1e-11, atol=1e-11 * scale, normwise=True)
    # Forward mode under a batch of tangents (jacfwd: a vmap of jvps).
    jac = jax.jit(jax.vmap(jax.jacfwd(lambda *s: fd(model, s))))(q, qd, tau)
    jac_one = jax.jit(lambda *x: jax.lax.map(lambda s: jax.jacfwd(lambda *t: fd(model, t))(*s), x))(q, qd, tau)
    assert_tree_allclose(jac, jac_one, rtol=1e-11, normwise=True)


def _branched_tree():
    """Ten bodies in three branches off a pelvis (two legs of three, a trunk with two
    arms), 3-D axes and offsets, the bodies listed so that no subtree is contiguous in
    the model's order: nq = 10 > 8, so `forward_dynamics` too takes the joint-space pair."""
    b = mb.ModelBuilder("branched_tree", gravity=(0.3, -9.81, 0.2))
    names = ["pelvis", "thigh_l", "thigh_r", "trunk", "shank_l", "shank_r", "arm_l", "arm_r", "foot_l", "foot_r"]
    parents = ["ground", "pelvis", "pelvis", "pelvis", "thigh_l", "thigh_r", "trunk", "trunk", "shank_l", "shank_r"]
    rng = np.random.default_rng(7)
    for k, (name, parent) in enumerate(zip(names, parents)):
        c = b.add_coordinate(f"q_{name}")
        a = rng.normal(size=(3, 3))
        b.add_body(mb.Body(name, 1.0 + 0.2 * k, rng.uniform(-0.1, 0.1, 3), jnp.asarray(a @ a.T * 0.002 + 0.05 * np.eye(3))))
        axis = tuple(rng.normal(size=3))
        if k == 0:
            b.add_joint(mb.prismatic(f"j_{name}", parent, name, axis, mb.Coordinate(c), offset=(0.0, 0.9, 0.0)))
        else:
            rot, _ = np.linalg.qr(rng.normal(size=(3, 3)))
            rot = rot * np.sign(np.linalg.det(rot))  # a proper rotation
            b.add_joint(mb.revolute(f"j_{name}", parent, name, axis, mb.Coordinate(c), offset=tuple(rng.uniform(-0.3, 0.3, 3)),
                                    parent_rotation=jnp.asarray(rot), child_translation=tuple(rng.uniform(-0.1, 0.1, 3))))
    return b.build()


def test_a_batch_last_pass_equals_its_states_on_a_branched_tree():
    """Under vmap the joint-space CRBA and RNEA run once on arrays with the batch as their
    trailing axis (`jaxmb._batching.batch_last`, in chunks of 128 here, the last one of
    44 states); state by state they run on the states' own arrays. Same values."""
    model = _branched_tree()
    q, qd, tau = _batched_state(model.nq, _BATCH, seed=3)
    calls = (
        lambda q, qd, tau: mb.forward_dynamics(model, q, qd, tau),
        lambda q, qd, tau: mb.inverse_dynamics(model, q, qd, tau),
        lambda q, qd, tau: mb.mass_matrix(model, q),
        lambda q, qd, tau: mb.bias_forces(model, q, qd),
    )
    every = lambda *x: tuple(fn(*x) for fn in calls)  # noqa: E731
    batched = jax.jit(jax.vmap(every))(q, qd, tau)
    assert_tree_allclose(batched, jax.jit(lambda *x: jax.lax.map(lambda s: every(*s), x))(q, qd, tau),
                         rtol=1e-12, atol=1e-12, normwise=True)
    # The state-by-state values against an independent route (autodiff).
    m, bias = jax.jit(lambda q, qd: (mb.mass_matrix(model, q, method="autodiff"),
                                     mb.bias_forces(model, q, qd, method="autodiff")))(q[5], qd[5])
    assert_tree_allclose((batched[2][5], batched[3][5]), (m, bias), rtol=1e-10, normwise=True)


def test_a_batched_mass_matrix_compiles_no_constant_the_size_of_the_batch():
    """The model's constants stay unbroadcast in the batch-last CRBA: a subtree sum of the
    masses broadcast over the batch was a product of two constants, which XLA folded into
    a batch-sized literal at compile time (seconds at 10^5 states on a GPU, where the batch
    is not chunked). The program's constants must not grow with the batch."""
    import re

    model = mb.models.planar_chain(20)
    batch = 4099  # a size no model dimension has
    f = jax.jit(jax.vmap(lambda x: _dyn._joint_space_crba(model, x)))
    hlo = f.lower(jnp.zeros((batch, len(model.joints)))).compile().as_text()
    shapes = re.findall(r"= f64\[([\d,]*)\]\{[^}]*\} constant\(", hlo)
    assert shapes, "no constant found: the pattern no longer reads the HLO"
    assert not any(str(batch) in s.split(",") for s in shapes), shapes
