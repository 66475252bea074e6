"""Forward simulation driven by muscle excitations (`jaxmb.control.MuscleExcitations`):
activations integrate with the mechanics, the muscles' tendon forces act through their
moment arms."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import jaxmb as mb
from models_for_tests import muscled_elbow


def _elbow():
    """A flexor (Thelen 2003, compliant tendon) and an extensor (De Groote et al. 2016, rigid
    tendon): two force-model classes, two activation-dynamics classes."""
    return muscled_elbow([
        ("flexor", "flexor", mb.Thelen2003Muscle(300.0, 0.12, 0.14, 0.1, 10.0), mb.FirstOrderActivation()),
        ("extensor", "extensor", mb.DeGrooteFregly2016Muscle(400.0, 0.12, 0.12, 0.1, 10.0, compliant_tendon=False),
         mb.DeGrooteActivation(smoothing=10.0))])


MODEL = _elbow()


class Steps(eqx.Module):
    """Constant excitations (a leaf, so that gradients reach them)."""

    level: jax.Array

    def __call__(self, t):
        return self.level


@jax.jit
def _run(level, q0, t1):
    ts = jnp.linspace(0.0, t1, 7)  # one shape: one compiled simulation for every test
    ctrl = mb.control.MuscleExcitations(MODEL, Steps(level), activation0=jnp.array([0.1, 0.2]))
    return mb.simulate(MODEL, q0, jnp.zeros(1), t1, ts=ts, controller=ctrl, rtol=1e-11, atol=1e-11,
                       solver="dopri8")


Q0 = jnp.array([0.8])
LEVEL = jnp.array([0.8, 0.3])


def test_activation_follows_the_closed_form_of_first_order_dynamics():
    # Thelen (2003): a' = (u - a) / (tau_act (0.5 + 1.5 a)) while u > a, whose solution from
    # a0 reaches a at t = tau_act [(0.5 + 1.5 u) ln((u - a0) / (u - a)) - 1.5 (a - a0)].
    sol = _run(LEVEL, Q0, 0.06)
    a = np.asarray(sol.state.controller[:, 0])
    u, a0, tau = 0.8, 0.1, 0.015
    t_of_a = tau * ((0.5 + 1.5 * u) * np.log((u - a0) / (u - a)) - 1.5 * (a - a0))
    np.testing.assert_allclose(t_of_a, np.asarray(sol.ts), rtol=0, atol=1e-9)


def _lengths_jacobian(q):
    return jax.jacfwd(mb.muscle_lengths, argnums=1)(MODEL, q)


def test_generalized_force_is_the_virtual_power_of_the_tendon_forces():
    # tau = -(dL/dq)^T F with L' = (dL/dq) q' (autodiff of the lengths), against the
    # controller's closed-form moment arms.
    ctrl = mb.control.MuscleExcitations(MODEL, Steps(LEVEL))

    @jax.jit
    def both(q, qd, a):
        J = _lengths_jacobian(q)
        forces = mb.muscle_forces(MODEL, a, mb.muscle_lengths(MODEL, q), J @ qd)
        return ctrl.torque(0.0, q, qd, a), -J.T @ forces, forces

    closed, virtual, forces = both(jnp.array([1.1]), jnp.array([-2.0]), jnp.array([0.6, 0.25]))
    np.testing.assert_allclose(closed, virtual, rtol=1e-12, atol=1e-12)
    assert float(jnp.min(forces)) > 1.0  # both muscles pull: the check is not about zeros


def test_trajectory_equals_scipy_on_the_same_equations():
    # The same ODE written from public pieces (forward dynamics, lengths by autodiff,
    # each muscle's activation dynamics called directly), integrated by scipy's DOP853.
    t1 = 0.3
    sol = _run(LEVEL, Q0, t1)
    dyn = [m.activation_dynamics for m in MODEL.muscles]

    @jax.jit
    def rhs(y):
        q, qd, a = y[:1], y[1:2], y[2:]
        J = _lengths_jacobian(q)
        force = mb.muscle_forces(MODEL, a, mb.muscle_lengths(MODEL, q), J @ qd)
        qdd = mb.forward_dynamics(MODEL, q, qd, -J.T @ force)
        return jnp.concatenate([qd, qdd, jnp.stack([d(u, ai) for d, u, ai in zip(dyn, LEVEL, a)])])

    ref = solve_ivp(lambda t, y: np.asarray(rhs(jnp.asarray(y))), (0.0, t1), np.array([0.8, 0.0, 0.1, 0.2]),
                    method="DOP853", rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sol.q[-1], ref.y[:1, -1], rtol=0, atol=1e-8)
    np.testing.assert_allclose(sol.state.controller[-1], ref.y[2:, -1], rtol=0, atol=1e-8)
    assert abs(float(sol.q[-1, 0]) - 0.8) > 0.05  # the muscles moved the arm


def test_gradient_with_respect_to_excitations_equals_finite_differences():
    def final_angle(level):
        return _run(level, Q0, 0.2).q[-1, 0]

    g = jax.jit(jax.grad(final_angle))(LEVEL)
    h = 1e-5
    fd = [(final_angle(LEVEL.at[i].add(h)) - final_angle(LEVEL.at[i].add(-h))) / (2 * h) for i in range(2)]
    np.testing.assert_allclose(g, jnp.stack(fd), rtol=1e-5)
    assert float(g[0]) > 0.0 > float(g[1])  # more flexor excitation flexes, more extensor extends


def test_a_muscle_without_activation_dynamics_is_named():
    no_dynamics = eqx.tree_at(lambda m: m.muscles[1].activation_dynamics, MODEL, None, is_leaf=lambda x: x is None)
    with pytest.raises(mb.ModelError, match="'extensor'.*activation dynamics.*FirstOrderActivation"):
        mb.control.MuscleExcitations(no_dynamics, Steps(LEVEL))


def test_excitations_of_the_wrong_shape_are_an_error():
    with pytest.raises(ValueError, match=r"shape \(2,\).*flexor, extensor.*got \(3,\)"):
        mb.control.MuscleExcitations(MODEL, lambda t: jnp.ones(3))
    with pytest.raises(ValueError, match="activation0"):
        mb.control.MuscleExcitations(MODEL, Steps(LEVEL), activation0=jnp.ones(3))


@pytest.mark.parametrize("activation0", [1.2, float("nan"), [0.1, -0.1]])
def test_initial_activations_outside_zero_one_are_named(activation0):
    """An initial activation outside [0, 1] (or NaN) is refused, naming the muscles; also when
    the controller is built under jit from numbers (where a jnp check would be skipped)."""
    message = r"activation0 must be in \[0, 1\]; muscles .*extensor \("
    with pytest.raises(ValueError, match=message):
        mb.control.MuscleExcitations(MODEL, Steps(LEVEL), activation0=activation0)
    with pytest.raises(ValueError, match=message):
        jax.jit(lambda: mb.control.MuscleExcitations(MODEL, Steps(LEVEL), activation0=activation0).activation0)()
    assert mb.control.MuscleExcitations(MODEL, Steps(LEVEL), activation0=1.0).activation0.shape == (2,)


def test_frozen_path_muscles_pull_along_opensims_moment_arms():
    """``moment_arms="frozen_path"``: the muscles' torque is ``R_frozen F_T`` with the tendon
    forces at the frozen path's lengthening speeds (OpenSim's), not ``-dL/dq``'s, over arm26's
    BIClong (its ellipsoid's tangent points are not stationary, so the two differ)."""
    import pathlib
    import warnings

    arm26 = pathlib.Path(mb.__file__).parent / "data" / "arm26.osim"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mb.io.read_osim(arm26, muscles=("BIClong",)).model
    ctrl = mb.control.MuscleExcitations(model, Steps(jnp.array([0.6])), moment_arms="frozen_path")
    q, qd, a = jnp.array([0.4, 1.2]), jnp.array([0.7, -1.1]), jnp.array([0.6])
    torque = eqx.filter_jit(lambda c: c.torque(0.0, q, qd, a))(ctrl)
    R, Rc = (mb.moment_arms(model, q, method=m) for m in ("frozen_path", "closed_form"))
    forces = mb.muscle_forces(model, a, mb.muscle_lengths(model, q), -R.T @ qd)
    np.testing.assert_allclose(torque, R @ forces, rtol=1e-12, atol=1e-12)
    assert float(jnp.max(jnp.abs(R - Rc))) > 1e-4
    with pytest.raises(ValueError, match="moment_arms must be 'closed_form' or 'frozen_path'"):
        mb.control.MuscleExcitations(MODEL, Steps(LEVEL), moment_arms="numeric")
