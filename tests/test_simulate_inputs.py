"""simulate() at its boundary: arguments that cannot be integrated fail at the call with a
message naming them, and runs that cannot go on end early with a result naming the cause
(issue 34, items 9 and 10)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb

PENDULUM = mb.models.double_pendulum()
Q0 = jnp.array([0.3, 1.0])
QD0 = jnp.zeros(2)


def _coupled():
    """One rod turned by q = (a, c) through a + c: c drives nothing of its own, so the
    mass matrix J^T m J with J = (1, 1) is singular everywhere."""
    b = mb.ModelBuilder("coupled", gravity=(0.0, -9.81, 0.0))
    a, c = b.add_coordinate("a"), b.add_coordinate("c")
    b.add_body(mb.Body("rod", 1.0, (0.5, 0.0, 0.0), jnp.diag(jnp.array([0.01, 0.1, 0.1]))))
    b.add_joint(mb.revolute("pin", "ground", "rod", (0.0, 0.0, 1.0), mb.Linear((a, c), (1.0, 1.0))))
    return b.build()


@pytest.mark.parametrize("name", ["rtol", "atol"])
@pytest.mark.parametrize("value", [-1.0, 0.0, np.nan, np.inf])
def test_tolerances_must_be_positive_and_finite(name, value):
    with pytest.raises(ValueError, match=f"simulate: {name} must be a positive finite number"):
        mb.simulate(PENDULUM, Q0, QD0, 1.0, **{name: value})


def test_a_relative_tolerance_of_one_or_more_is_named():
    """rtol=10 was accepted and ran a million steps (the CLI already refused it)."""
    with pytest.raises(ValueError, match=r"simulate: rtol must be below 1 \(a relative error\), got 10.0"):
        mb.simulate(PENDULUM, Q0, QD0, 1.0, rtol=10.0, atol=10.0)


def test_a_tolerance_float32_cannot_reach_names_x64():
    with pytest.raises(ValueError, match=r"rtol=1e-12 is below what float32 can resolve.*jax_enable_x64"):
        mb.simulate(PENDULUM, Q0.astype(jnp.float32), QD0, 1.0, rtol=1e-12)


@pytest.mark.parametrize("kwargs, name", [(dict(t1=np.nan), "t1"), (dict(t1=np.inf), "t1"),
                                          (dict(t1=1.0, t0=np.nan), "t0"), (dict(t1=1.0, t0=-np.inf), "t0")])
def test_time_span_must_be_finite(kwargs, name):
    with pytest.raises(ValueError, match=f"simulate: {name} must be finite"):
        mb.simulate(PENDULUM, Q0, QD0, **kwargs)


def test_backwards_time_span_is_an_error():
    with pytest.raises(ValueError, match=r"simulate: t1 = -1\.0 is before t0 = 0\.0"):
        mb.simulate(PENDULUM, Q0, QD0, -1.0)
    # Traced, the same check raises at run time.
    with pytest.raises(eqx.EquinoxRuntimeError, match="simulate: t1 is before t0"):
        eqx.filter_jit(lambda t1: mb.simulate(PENDULUM, Q0, QD0, t1).q)(jnp.asarray(-1.0))


@pytest.mark.parametrize("ts, match", [([0.5, 2.0], r"ts must lie within \[t0, t1\] = \[0\.0, 1\.0\]; ts\[1\] = 2\.0"),
                                       ([-0.1, 0.5], r"ts must lie within .*; ts\[0\] = -0\.1"),
                                       ([0.2, 0.5, 0.4], r"ts must be non-decreasing; ts\[2\] = 0\.4 comes after")])
def test_save_times_outside_the_span_or_unsorted_are_named(ts, match):
    with pytest.raises(ValueError, match=f"simulate: the save times {match}"):
        mb.simulate(PENDULUM, Q0, QD0, 1.0, ts=jnp.asarray(ts))


@pytest.mark.parametrize("name", ["q0", "qd0", "tau"])
def test_nonfinite_inputs_fail_at_the_call(name):
    args = dict(q0=Q0, qd0=QD0, tau=jnp.zeros(2))
    args[name] = jnp.array([0.1, np.nan])
    with pytest.raises(ValueError, match=f"simulate: {name} must be finite"):
        mb.simulate(PENDULUM, args["q0"], args["qd0"], 1.0, tau=args["tau"])


def test_wrong_shapes_name_the_argument():
    with pytest.raises(ValueError, match=r"simulate: q0 must have shape \(2,\).*got shape \(3,\)"):
        mb.simulate(PENDULUM, jnp.zeros(3), QD0, 1.0)
    with pytest.raises(ValueError, match=r"simulate: qd0 must have shape \(2,\).*got shape \(2, 1\)"):
        mb.simulate(PENDULUM, Q0, jnp.zeros((2, 1)), 1.0)
    with pytest.raises(ValueError, match=r"simulate: tau must have shape \(2,\)"):
        mb.simulate(PENDULUM, Q0, QD0, 1.0, tau=jnp.zeros(3))


def test_integer_initial_state_is_promoted():
    run = jax.jit(lambda q0: mb.simulate(PENDULUM, q0, jnp.zeros(2, int), 0.5).q)
    # Two compiled programs (int and float arguments): equal to round-off, not bit for bit.
    np.testing.assert_allclose(run(jnp.array([1, 0])), run(jnp.array([1.0, 0.0])), rtol=1e-12, atol=1e-14)


def test_nonfinite_state_under_jit_ends_the_run_with_its_cause():
    """Under jit the values are not known at the call: a NaN initial state, or forces that
    turn NaN along the way, end the run at once with RESULTS.nonfinite_state (it ran to
    max_steps and blamed the step count before)."""
    run = jax.jit(lambda q0, tau: mb.simulate(PENDULUM, q0, QD0, 1.0, tau=tau, throw=False))
    bad_state = run(jnp.array([np.nan, 0.0]), jnp.zeros(2))
    assert bad_state.result == mb.RESULTS.nonfinite_state and not bool(bad_state.success)
    assert int(bad_state.stats["num_steps"]) <= 1
    bad_force = run(Q0, jnp.array([np.inf, 0.0]))
    assert bad_force.result == mb.RESULTS.nonfinite_state
    assert int(bad_force.stats["num_steps"]) < 100  # it gives up once the steps reach rounding

    late = jax.jit(lambda q0: mb.simulate(PENDULUM, q0, QD0, 1.0, throw=False,
                                          tau=lambda t, q, qd: jnp.where(t > 0.5, jnp.nan, 0.0) * q))(Q0)
    assert late.result == mb.RESULTS.nonfinite_state
    np.testing.assert_allclose(float(late.t_end), 0.5, atol=1e-12)  # where it stopped
    # The last accepted state: the motion at 0.5 to the integrator's tolerance (default 1e-8).
    np.testing.assert_allclose(late.q_end, mb.simulate(PENDULUM, Q0, QD0, 0.5).q_end, rtol=0, atol=1e-8)
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"simulate: the state \(q, qd\) or the applied forces became "
                                                       "non-finite"):
        jax.block_until_ready(eqx.filter_jit(lambda q0: mb.simulate(PENDULUM, q0, QD0, 1.0).q)(
            jnp.array([np.nan, 0.0])))


def test_singular_mass_matrix_is_a_result_not_a_million_steps():
    model = _coupled()
    assert float(jnp.linalg.det(mb.mass_matrix(model, Q0))) == pytest.approx(0.0, abs=1e-12)
    sol = jax.jit(lambda m: mb.simulate(m, Q0, QD0, 1.0, throw=False))(model)
    assert sol.result == mb.RESULTS.singular_mass_matrix and not bool(sol.success)
    # The first step's right-hand side is not finite: its rejections shrink the step to
    # rounding level (a few dozen), no step is accepted, and the end state names the cause.
    assert int(sol.stats["num_accepted_steps"]) == 0 and int(sol.stats["num_steps"]) < 50
    assert float(sol.t_end) == 0.0
    with pytest.raises(eqx.EquinoxRuntimeError, match="simulate: the mass matrix is singular"):
        jax.block_until_ready(mb.simulate(model, Q0, QD0, 1.0).q)


def test_an_eager_forward_dynamics_at_a_singular_mass_matrix_raises():
    """Before: NaN accelerations. A coordinate read only with a zero weight passes the build's
    structural check (Linear reads it) and moves no mass: named; the coupled model's M is
    singular without a coordinate of its own to blame. Under jit nothing is added (the
    simulation's result code says it, test above)."""
    with pytest.raises(mb.ModelError, match=r"forward_dynamics: the mass matrix of 'coupled' is singular at q = "):
        mb.forward_dynamics(_coupled(), Q0, QD0)
    b = mb.ModelBuilder("zero_weight")
    a, c = b.add_coordinate("a"), b.add_coordinate("c")
    for body, parent, function in (("r1", "ground", mb.Coordinate(a)), ("r2", "r1", mb.Linear((a, c), (1.0, 0.0)))):
        b.add_body(mb.Body(body, 1.0, (0.0, -0.5, 0.0), 0.1 * jnp.eye(3)))
        b.add_joint(mb.revolute(f"j_{body}", parent, body, (0.0, 0.0, 1.0), function))
    model = b.build()
    with pytest.raises(mb.ModelError, match=r"coordinate\(s\) \['c'\] move no mass there"):
        mb.forward_dynamics(model, Q0, QD0)
    assert not np.all(np.isfinite(jax.jit(lambda q: mb.forward_dynamics(model, q, QD0))(Q0)))


def test_a_failing_member_of_a_batch_says_why():
    """With throw=True a batch raises when one member fails, naming the cause; with
    throw=False each member has its own result."""
    q0s = jnp.array([[0.1, 0.0], [np.nan, 0.0], [0.2, 0.0]])
    loose = eqx.filter_jit(jax.vmap(lambda q0: mb.simulate(PENDULUM, q0, QD0, 1.0, throw=False)))(q0s)
    ok = np.asarray(loose.result == mb.RESULTS.successful)
    assert ok.tolist() == [True, False, True]
    assert np.asarray(loose.result == mb.RESULTS.nonfinite_state).tolist() == [False, True, False]
    with pytest.raises(eqx.EquinoxRuntimeError, match="non-finite"):
        jax.block_until_ready(eqx.filter_jit(jax.vmap(lambda q0: mb.simulate(PENDULUM, q0, QD0, 1.0).q))(q0s))


def test_controller_state_is_a_pytree():
    """A controller whose state is a pytree (here a dict of two arrays) integrates with the
    mechanics, and its state is saved leaf by leaf."""

    class Integrals(mb.control.AbstractController):
        def init(self, q0, qd0):
            return {"e": jnp.zeros(2, q0.dtype), "t": jnp.zeros((), q0.dtype)}

        def torque(self, t, q, qd, z):
            return -q - qd - z["e"]

        def state_derivative(self, t, q, qd, z):
            return {"e": q, "t": jnp.ones((), q.dtype)}

    ts = jnp.linspace(0.0, 1.0, 3)
    sol = jax.jit(lambda: mb.simulate(PENDULUM, Q0, QD0, 1.0, ts=ts, controller=Integrals(), rtol=1e-10,
                                      atol=1e-10))()
    assert sol.z["e"].shape == (3, 2) and sol.state.controller["t"].shape == (3,)
    np.testing.assert_allclose(sol.z["t"], ts, rtol=0, atol=1e-14)  # the integral of 1: exact for any Runge-Kutta


def test_a_failing_member_of_a_batch_is_named():
    q0s = jnp.array([[0.1, 0.0], [0.2, 0.0], [np.nan, 0.0], [0.3, 0.0]])
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"simulate \(batch member 2 along the vmapped axis, the first "
                                                       r"that failed\): the state \(q, qd\)"):
        jax.block_until_ready(eqx.filter_jit(jax.vmap(lambda q0: mb.simulate(PENDULUM, q0, QD0, 1.0).q))(q0s))
    # Gradients pass through the check.
    grad = jax.jit(jax.grad(lambda q0: mb.simulate(PENDULUM, q0, QD0, 0.1).q[-1, 0]))(Q0)
    assert np.all(np.isfinite(np.asarray(grad)))


def test_a_gradient_through_a_failed_run_raises_under_jit():
    """Under `jit(grad(...))` the run's outputs are not needed, only their derivatives, and
    the check on them was dropped with them: a run stopped at max_steps gave a gradient of
    zeros, a non-finite one NaN, silently. The derivatives now pass a checked gate. The
    gradient of a run that succeeds is unchanged (the same as without jit)."""
    def loss(q0, max_steps=4096):
        return mb.simulate(PENDULUM, q0, QD0, 0.5, max_steps=max_steps).q[-1].sum()

    with pytest.raises(eqx.EquinoxRuntimeError, match="reached max_steps"):
        jax.block_until_ready(eqx.filter_jit(jax.grad(lambda q0: loss(q0, max_steps=3)))(Q0))
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"batch member 1 .*non-finite"):
        jax.block_until_ready(eqx.filter_jit(jax.vmap(jax.grad(loss)))(jnp.stack([Q0, Q0.at[0].set(np.nan)])))
    np.testing.assert_allclose(jax.jit(jax.grad(loss))(Q0), jax.grad(loss)(Q0), rtol=1e-13)


@pytest.mark.parametrize("tau_ts, match", [
    (jnp.linspace(1.0, 0.0, 5), r"tau_ts must increase; tau_ts\[1\] = 0.75 follows 1.0"),
    (jnp.array([0.0, 0.25, 0.25, 0.75, 1.0]), r"tau_ts must increase; tau_ts\[2\] = 0.25"),
    (jnp.linspace(0.0, 0.5, 5), r"tau_ts must cover \[t0, t1\] = \[0.0, 1.0\].*spans \[0.0, 0.5\]"),
])
def test_a_torque_series_must_increase_and_cover_the_span(tau_ts, match):
    """Unsorted sample times read the samples out of order, and a series ending before t1
    was extrapolated linearly: both gave another trajectory, silently."""
    tau = jnp.stack([jnp.linspace(0.0, 4.0, 5), jnp.zeros(5)], axis=1)
    with pytest.raises(ValueError, match=match):
        mb.simulate(PENDULUM, Q0, QD0, 1.0, tau=tau, tau_ts=tau_ts)
    with pytest.raises(eqx.EquinoxRuntimeError, match="tau_ts must"):
        jax.block_until_ready(eqx.filter_jit(lambda ts: mb.simulate(PENDULUM, Q0, QD0, 1.0, tau=tau, tau_ts=ts).q)(
            tau_ts))
    with pytest.raises(ValueError, match="at least two sample times"):
        mb.simulate(PENDULUM, Q0, QD0, 1.0, tau=tau[:1], tau_ts=jnp.zeros(1))


def test_a_torque_callable_must_return_the_forces():
    """`forward_dynamics` takes tau=None as no torque: a callable that forgot its return ran
    unforced and reported success."""
    with pytest.raises(ValueError, match=r"tau\(t, q, qd\) returned None.*shape \(2,\)"):
        mb.simulate(PENDULUM, Q0, QD0, 1.0, tau=lambda t, q, qd: None)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(dt0=0.0), ValueError, r"dt0 must be None .* or a positive finite step, s; got 0.0"),  # ran to max_steps
    (dict(dt0=-0.01), ValueError, "dt0 must be None"),
    (dict(dt0=np.nan), ValueError, "dt0 must be None"),
    (dict(max_steps=0), ValueError, "max_steps must be an integer >= 1, got 0"),
])
def test_step_options_out_of_their_domain_are_named(kwargs, error, match):
    """Before: 10^6 steps then max_steps, or diffrax's messages. (A solver or controller of
    the wrong type is refused by name too; the suite's run-time type checks reach it first.)"""
    with pytest.raises(error, match=match):
        mb.simulate(PENDULUM, Q0, QD0, 1.0, **kwargs)


def test_a_time_span_that_is_not_scalar_is_named():
    with pytest.raises(ValueError, match=r"simulate: t1 must be a scalar, got shape \(2,\)"):
        mb.simulate(PENDULUM, Q0, QD0, jnp.array([1.0, 2.0]))
