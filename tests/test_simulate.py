"""simulate(): energy conservation, torque inputs, controllers, vmap and gradients."""

import logging
import inspect
import warnings

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb
from models_for_tests import walker_knee

PENDULUM = mb.models.double_pendulum()
Q0 = jnp.array([np.pi / 10, np.pi / 3])  # Watanabe and Duarte's initial state
QD0 = jnp.array([2 * np.pi, -6 * np.pi])


def _energy(model, sol):
    return jax.vmap(lambda q, qd: mb.kinetic_energy(model, q, qd) + mb.potential_energy(model, q))(sol.q, sol.qd)


def test_unforced_double_pendulum_conserves_energy_over_20_s():
    """Chaotic, fast motion (Watanabe and Duarte's initial state): relative energy drift < 1e-10."""
    run = jax.jit(lambda m: mb.simulate(m, Q0, QD0, 20.0, ts=jnp.linspace(0, 20, 101), solver="dopri8",
                                        rtol=1e-13, atol=1e-13))
    sol = run(PENDULUM)
    assert bool(sol.success)
    energy = np.asarray(jax.jit(_energy)(PENDULUM, sol))
    drift = np.max(np.abs(energy - energy[0])) / abs(energy[0])
    assert drift < 1e-10, drift
    assert np.ptp(np.asarray(sol.q[:, 1])) > 5.0  # the motion is not trivial


def test_unforced_walker_knee_conserves_energy():
    """A knee turning about three axes by splines of one angle (OpenSim's walker knee, whose
    velocity terms in OpenSim 4.6 lose 8e-3 J in 0.05 s: docs/opensim-parity.md) swings
    under gravity: relative energy drift < 1e-10 at Dopri8 1e-13."""
    model = walker_knee()
    q0, qd0 = jnp.array([0.3, 0.6]), jnp.array([0.0, 5.0])
    sol = jax.jit(lambda m: mb.simulate(m, q0, qd0, 1.0, ts=jnp.linspace(0, 1, 51), solver="dopri8",
                                        rtol=1e-13, atol=1e-13))(model)
    assert bool(sol.success)
    energy = np.asarray(jax.jit(_energy)(model, sol))
    assert np.max(np.abs(energy - energy[0])) / abs(energy[0]) < 1e-10
    assert np.ptp(np.asarray(sol.q[:, 1])) > 0.5  # the knee swings through its splines


def test_energy_drift_is_visible_at_loose_tolerance():
    """The conservation test can fail: a loose tolerance shows drift well above 1e-10."""
    sol = jax.jit(lambda m: mb.simulate(m, Q0, QD0, 5.0, ts=jnp.linspace(0, 5, 11), rtol=1e-4, atol=1e-4))(PENDULUM)
    energy = np.asarray(jax.jit(_energy)(PENDULUM, sol))
    assert np.max(np.abs(energy - energy[0])) / abs(energy[0]) > 1e-8


def test_torque_forms_agree():
    """Constant, sampled (T, nq) and callable torques give the same trajectory."""
    tau = mb.models.double_pendulum_torques(1.5, -0.5)
    ts = jnp.linspace(0.0, 1.0, 5)

    @jax.jit
    def run_all(m):
        a = mb.simulate(m, Q0, QD0 * 0, 1.0, ts=ts, tau=tau, rtol=1e-11, atol=1e-11)
        b = mb.simulate(m, Q0, QD0 * 0, 1.0, ts=ts, tau=jnp.stack([tau, tau]), tau_ts=jnp.array([0.0, 1.0]),
                        rtol=1e-11, atol=1e-11)
        c = mb.simulate(m, Q0, QD0 * 0, 1.0, ts=ts, tau=lambda t, q, qd: tau, rtol=1e-11, atol=1e-11)
        return a.q, b.q, c.q

    qa, qb, qc = run_all(PENDULUM)
    np.testing.assert_allclose(qa, qb, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(qa, qc, rtol=1e-9, atol=1e-10)


def test_pid_holds_the_elbow_of_the_double_pendulum():
    """Watanabe and Duarte's commented controller: M12 = 30 (pi/3 - theta2) - 2 theta2' + 3 ∫ e dt."""
    pid = mb.control.PID((1,), np.pi / 3, kp=30.0, ki=3.0, kd=2.0, selection=jnp.array([[-1.0], [1.0]]))
    sol = jax.jit(lambda m: mb.simulate(m, jnp.zeros(2), jnp.zeros(2), 20.0, ts=jnp.array([20.0]), controller=pid,
                                        rtol=1e-9, atol=1e-9))(PENDULUM)
    assert bool(sol.success)
    assert abs(float(sol.q[-1, 1]) - np.pi / 3) < 2e-2
    assert sol.z.shape == (1, 1)


def test_computed_torque_tracks_a_reference():
    model = mb.models.three_link_arm()

    def reference(t):
        q = jnp.array([0.3 * jnp.sin(t), 0.5 + 0.2 * t, -0.1 * t])
        qd = jnp.array([0.3 * jnp.cos(t), 0.2, -0.1])
        qdd = jnp.array([-0.3 * jnp.sin(t), 0.0, 0.0])
        return q, qd, qdd

    ctrl = mb.control.ComputedTorque(model, reference, kp=jnp.full(3, 100.0), kd=jnp.full(3, 20.0))
    q0 = reference(0.0)[0] + 0.05
    ts = jnp.linspace(0.0, 2.0, 9)
    sol = jax.jit(lambda: mb.simulate(model, q0, reference(0.0)[1], 2.0, ts=ts, controller=ctrl,
                                      rtol=1e-11, atol=1e-11))()
    # The computed torque cancels the dynamics exactly, so the error obeys e'' + 20 e' + 100 e = 0:
    # critically damped, e(t) = e0 (1 + 10 t) exp(-10 t) from e(0) = 0.05, e'(0) = 0.
    error = 0.05 * (1.0 + 10.0 * ts) * jnp.exp(-10.0 * ts)
    expected = jax.vmap(lambda t: reference(t)[0])(ts) + error[:, None]
    np.testing.assert_allclose(sol.q, expected, rtol=0, atol=1e-9)


def test_computed_torque_is_the_inverse_dynamics():
    """The controller forms M q'' + bias as the forward dynamics does (shared in a
    simulation); its value is the Newton-Euler inverse dynamics at the commanded
    acceleration, gravity and loads included."""
    model = mb.models.three_link_arm()
    q, qd = jnp.array([0.3, -0.7, 1.1]), jnp.array([0.4, -1.3, 0.9])
    ref = (jnp.array([0.2, -0.5, 1.0]), jnp.array([0.1, 0.2, -0.3]), jnp.array([1.5, -2.0, 0.5]))
    ctrl = mb.control.ComputedTorque(model, lambda t: ref, kp=jnp.array([100.0, 50.0, 10.0]), kd=jnp.full(3, 20.0))
    qdd = ref[2] + ctrl.kd * (ref[1] - qd) + ctrl.kp * (ref[0] - q)
    expected = mb.inverse_dynamics(model, q, qd, qdd)
    np.testing.assert_allclose(ctrl.torque(0.0, q, qd, ctrl.init(q, qd)), expected, rtol=1e-12,
                               atol=1e-12 * float(jnp.abs(expected).max()))
    with pytest.raises(mb.ModelError, match="ComputedTorque"):
        ctrl.torque(0.0, q[:2], qd, ctrl.init(q, qd))


def test_controllers_refuse_indices_and_references_that_do_not_fit_the_model():
    """A PID index past the model's coordinates was clamped on read and dropped on write
    (the run went uncontrolled, reporting success); a reference of the wrong shape
    broadcast (a (1,) q_ref tracked [0.5, 0.5])."""
    m = mb.models.double_pendulum()
    q0, qd0 = jnp.array([0.3, -0.2]), jnp.zeros(2)
    with pytest.raises(ValueError, match=r"PID: indices \(5,\) must be below the model's number of coordinates, 2"):
        mb.simulate(m, q0, qd0, 1.0, controller=mb.control.PID((5,), 1.0, 50.0, kd=5.0))
    with pytest.raises(ValueError, match=r"PID: selection must have shape \(2, 1\) for a model of 2"):
        mb.simulate(m, q0, qd0, 1.0, controller=mb.control.PID(1, 1.0, 50.0, selection=jnp.ones((3, 1))))
    with pytest.raises(ValueError, match="PID: a coordinate index must be an integer >= 0"):
        mb.control.PID((-1,), 1.0, 50.0)
    with pytest.raises(ValueError, match="PID: indices must be one or more distinct coordinate indices"):
        mb.control.PID((0, 0), 1.0, 50.0)
    # A single index as an int, as a tuple of one.
    one, ones = (mb.simulate(m, q0, qd0, 0.2, controller=mb.control.PID(i, 1.0, 50.0)).q for i in (1, (1,)))
    np.testing.assert_array_equal(one, ones)
    bad = mb.control.ComputedTorque(m, lambda t: (jnp.array([0.5]), jnp.zeros(2), jnp.zeros(2)), 1.0, 1.0)
    with pytest.raises(mb.ModelError, match=r"ComputedTorque: reference\(t\)'s q_ref must have shape \(2,\)"):
        mb.simulate(m, q0, qd0, 1.0, controller=bad)


@pytest.mark.parametrize("make, message", [
    (lambda m: mb.control.PID([0, 1], 0.0, jnp.ones(3)), r"PID: kp must be a scalar or have shape \(2,\)"),
    (lambda m: mb.control.PID([0], jnp.nan, 1.0), r"PID: target must be finite"),
    (lambda m: mb.control.PID([0], 0.0, 1.0, selection=jnp.ones((2, 2))), r"PID: selection must have shape \(nq, 1\)"),
    # before: accepted; the run then failed with 'state or applied forces became non-finite'
    (lambda m: mb.control.PID([0], 0.0, 1.0, selection=np.array([[1.0], [np.nan]])), r"PID: selection must be finite"),
    # before: 'not enough values to unpack (expected 3, got 2)' at the first step
    (lambda m: mb.control.ComputedTorque(m, lambda t: (jnp.zeros(2),) * 2, 1.0, 1.0),
     r"ComputedTorque: reference\(t\) must return the three arrays \(q_ref, qd_ref, qdd_ref\), got 2 values"),
    (lambda m: mb.control.ComputedTorque(m, lambda t: (jnp.zeros(2),) * 3, jnp.ones(3), 1.0),
     r"ComputedTorque: kp must be a scalar or have shape \(2,\) \(one per coordinate\), got \(3,\)"),
    (lambda m: mb.control.ComputedTorque(m, lambda t: (jnp.zeros(2),) * 3, 1.0, jnp.inf), "ComputedTorque: kd must be finite"),
])
def test_controller_gains_of_the_wrong_shape_or_not_finite_are_named(make, message):
    """Before: a JAX broadcasting error naming no argument, or a NaN torque at run time."""
    with pytest.raises(ValueError, match=message):
        make(mb.models.double_pendulum())
    # the same when the controller is built while a jit traces (its gains given as numbers)
    with pytest.raises(ValueError, match=message):
        jax.jit(lambda: (make(mb.models.double_pendulum()), jnp.zeros(()))[1])()


def test_implicit_solver_agrees_with_explicit():
    ts = jnp.linspace(0.0, 1.0, 3)
    chain = mb.models.planar_chain(2)
    q0 = jnp.array([0.4, -0.3])

    @jax.jit
    def both(m):
        a = mb.simulate(m, q0, jnp.zeros(2), 1.0, ts=ts, solver="kvaerno5", rtol=1e-10, atol=1e-10)
        b = mb.simulate(m, q0, jnp.zeros(2), 1.0, ts=ts, solver="tsit5", rtol=1e-10, atol=1e-10)
        return a.q, b.q

    qa, qb = both(chain)
    np.testing.assert_allclose(qa, qb, atol=1e-7)


def test_kvaerno5_stage_iteration_runs_until_it_converges():
    """The stage iteration behind ``solver="kvaerno5"`` (``_VeryChord``) keeps iterating
    while its contraction rate promises convergence. Chord on ``x^3 + x = 3`` from x = 2
    (Jacobian frozen there) converges linearly at rate 1 - f'(x*)/f'(2) ≈ 0.54, so it needs
    many iterations; diffrax 0.7.2's ``VeryChord`` reports divergence after the second."""
    import optimistix as optx

    from jaxmb._solvers import _VeryChord  # private: the stage iteration behind mb.stage_root_finder

    def residual(x, args):
        return x**3 + x - 3.0

    sol = optx.root_find(residual, _VeryChord(rtol=1e-10, atol=1e-10), jnp.array(2.0), throw=False)
    assert sol.result == optx.RESULTS.successful
    assert int(sol.stats["num_steps"]) > 5
    assert abs(float(residual(sol.value, None))) < 1e-9
    # A diverging iteration still fails: on x^3 - 2x + 2 = 0 chord with the slope frozen
    # at x = 0.5 runs away (0.5, 1.4, 2.96, 20.5, ...; rate > 2).
    runaway = optx.root_find(lambda x, a: x**3 - 2 * x + 2, _VeryChord(rtol=1e-10, atol=1e-10), jnp.array(0.5),
                             throw=False)
    assert runaway.result == optx.RESULTS.nonlinear_divergence


def test_kvaerno5_takes_about_the_steps_of_an_explicit_solver():
    """On a non-stiff problem an implicit solver of order 5 takes about as many steps as
    Tsit5 (Watanabe and Duarte's double pendulum from its fast initial state, 2 s at 1e-6), and few of them are
    rejected. With diffrax 0.7.2's ``Kvaerno5()`` (its default stage iteration) the same run
    takes several times the steps, most of them rejected."""
    run = jax.jit(lambda m, s: mb.simulate(m, Q0, QD0, 2.0, rtol=1e-6, atol=1e-6, solver=s).stats,
                  static_argnums=1)
    stats = run(PENDULUM, "kvaerno5")
    steps, rejected = int(stats["num_steps"]), int(stats["num_rejected_steps"])
    reference = int(run(PENDULUM, "tsit5")["num_steps"])
    print(f"kvaerno5: {steps} steps ({rejected} rejected), Tsit5 {reference}")
    assert steps < 1.5 * reference
    assert rejected < 0.3 * steps


def test_an_implicit_solver_with_diffraxs_stage_iteration_gets_a_warning():
    """A diffrax implicit solver object is used as given; with diffrax 0.7.2's stage
    iteration it gets a warning that names the fix, and with ``mb.stage_root_finder()``
    (the iteration of ``solver="kvaerno5"``, tested above) none."""
    from jaxmb._solvers import _VeryChord, _solver_by_name  # private: simulate's solver lookup, called alone

    with pytest.warns(UserWarning, match=r"Kvaerno4 .*stage_root_finder"):
        _solver_by_name(diffrax.Kvaerno4(), "simulate")
    with pytest.warns(UserWarning, match=r"simulate_dae: Kvaerno5"):
        _solver_by_name(diffrax.Kvaerno5(), "simulate_dae")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for solver in (diffrax.Kvaerno4(root_finder=mb.stage_root_finder()), diffrax.Tsit5(), "kvaerno5"):
            _solver_by_name(solver, "simulate")
    assert isinstance(mb.stage_root_finder(), _VeryChord)
    assert isinstance(_solver_by_name("kvaerno5").root_finder, _VeryChord)


def test_a_warning_names_the_line_of_the_users_call():
    """However deep in jaxmb (and in JAX's tracing) the cause is found, the warning is
    attributed to the caller's line, not to the library's."""
    with pytest.warns(UserWarning, match=r"Kvaerno4 .*stage_root_finder") as record:
        line = inspect.currentframe().f_lineno + 1  # the next line, the one the warning names
        mb.simulate(PENDULUM, Q0, QD0, 0.01, solver=diffrax.Kvaerno4())
    (w,) = [w for w in record if "stage_root_finder" in str(w.message)]
    assert (w.filename, w.lineno) == (__file__, line)


def test_vmap_over_initial_conditions_and_masses():
    q0s = jnp.stack([Q0, Q0 * 0.5, -Q0])
    run = jax.jit(jax.vmap(lambda q0: mb.simulate(PENDULUM, q0, jnp.zeros(2), 1.0, rtol=1e-10, atol=1e-10).q[-1]))
    batched = run(q0s)
    single = jax.jit(lambda q0: mb.simulate(PENDULUM, q0, jnp.zeros(2), 1.0, rtol=1e-10, atol=1e-10).q[-1])
    np.testing.assert_allclose(batched[2], single(q0s[2]), rtol=1e-12, atol=1e-12)

    def with_mass(m2):
        model = eqx.tree_at(lambda m: m.bodies[1].mass, PENDULUM, m2)
        return mb.simulate(model, Q0, jnp.zeros(2), 1.0, rtol=1e-10, atol=1e-10).q[-1]

    out = jax.jit(jax.vmap(with_mass))(jnp.array([0.5, 1.0, 2.0]))
    np.testing.assert_allclose(out[1], single(Q0), rtol=1e-12, atol=1e-12)
    assert float(jnp.max(jnp.abs(out[0] - out[2]))) > 1e-3


def test_gradient_through_simulation_matches_finite_differences():
    """d/dm2 of a loss on the final state: reverse mode through diffrax vs central differences."""

    def loss(m2):
        model = eqx.tree_at(lambda m: m.bodies[1].mass, PENDULUM, m2)
        sol = mb.simulate(model, Q0, jnp.zeros(2), 1.5, rtol=1e-12, atol=1e-12)
        return jnp.sum(sol.q[-1] ** 2) + 0.1 * jnp.sum(sol.qd[-1] ** 2)

    grad = jax.jit(jax.grad(loss))(1.3)
    h = 1e-5
    f = jax.jit(loss)
    fd = (f(1.3 + h) - f(1.3 - h)) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-6)


def test_forward_mode_derivative_equals_reverse_mode():
    """For a few parameters, ``jax.jacfwd`` with ``adjoint=diffrax.ForwardMode()`` carries
    the tangents along the simulation (no backward pass). Both differentiate the same
    discrete solution, so they agree to rounding, and with the finite differences above."""
    import diffrax

    def final(m2, adjoint):
        model = eqx.tree_at(lambda m: m.bodies[1].mass, PENDULUM, m2)
        return mb.simulate(model, Q0, jnp.zeros(2), 1.5, rtol=1e-10, atol=1e-10, adjoint=adjoint).q[-1]

    forward = jax.jit(jax.jacfwd(lambda m2: final(m2, diffrax.ForwardMode())))(1.3)
    reverse = jax.jit(jax.jacrev(lambda m2: final(m2, None)))(1.3)
    assert float(jnp.max(jnp.abs(forward))) > 1e-2
    np.testing.assert_allclose(forward, reverse, rtol=1e-10, atol=1e-12)
    h = 1e-5
    f = jax.jit(lambda m2: final(m2, None))
    np.testing.assert_allclose(forward, (f(1.3 + h) - f(1.3 - h)) / (2 * h), rtol=1e-5)


def test_failure_is_reported_not_hidden():
    run = jax.jit(lambda m: mb.simulate(m, Q0, QD0, 20.0, max_steps=10, throw=False))
    sol = run(PENDULUM)
    assert not bool(sol.success)
    assert 0.0 < float(sol.t_end) < 20.0 and np.all(np.isfinite(sol.q_end))  # where it stopped
    with pytest.raises(Exception, match="max_steps|maximum number of solver steps"):
        jax.block_until_ready(jax.jit(lambda m: mb.simulate(m, Q0, QD0, 20.0, max_steps=10).q)(PENDULUM))


def test_bad_arguments():
    with pytest.raises(ValueError, match="shape \\(2,\\)"):
        mb.simulate(PENDULUM, jnp.zeros(3), jnp.zeros(3), 1.0)
    with pytest.raises(ValueError, match="unknown solver"):
        mb.simulate(PENDULUM, Q0, QD0, 1.0, solver="euler-ish")
    with pytest.raises(ValueError, match="tau_ts"):
        mb.simulate(PENDULUM, Q0, QD0, 1.0, tau=jnp.zeros((3, 2)))


def test_solution_fields():
    sol = jax.jit(lambda m: mb.simulate(m, Q0, QD0, 0.5, ts=jnp.linspace(0, 0.5, 4)))(PENDULUM)
    assert sol.ts.shape == (4,) and sol.q.shape == (4, 2) and sol.qd.shape == (4, 2)
    np.testing.assert_allclose(sol.q[0], Q0)
    assert sol.result == mb.RESULTS.successful and bool(sol.success)
    assert sol.state.q is sol.q and sol.state.controller is None and sol.z.shape == (4, 0)
    np.testing.assert_allclose(sol.state_end.q, sol.q_end)
    assert float(sol.t_end) == 0.5 and sol.loop_results == {}
    np.testing.assert_allclose(sol.q_end, sol.q[-1], rtol=1e-12)
    np.testing.assert_allclose(sol.qd_end, sol.qd[-1], rtol=1e-12)


def test_a_solve_traces_the_dynamics_once(monkeypatch):
    """diffrax evaluates the vector field at several places of its program (initial step
    size, first stage, the stages, the step-end check); the right-hand side is traced
    once and reused there (the suite and large models are trace-bound). Three traces
    here without that (five with a loop's step-end check); none if a model of the same
    structure was traced before."""
    from jaxmb import _simulate_state  # private: the test counts traces of the dynamics inside simulate

    calls = []

    def counting(*args, **kwargs):
        calls.append(1)
        return mb.forward_dynamics(*args, **kwargs)

    monkeypatch.setattr(_simulate_state, "forward_dynamics", counting)
    model = mb.models.three_link_arm(spring_force=3.0)
    # Standard dtype promotion here: diffrax evaluates the vector field both inside its own
    # `jax.numpy_dtype_promotion("standard")` scopes (e.g. Tsit5.step, Dopri8.step) and outside
    # them; the setting is part of jit's cache key, so under "strict" it is traced twice.
    with jax.numpy_dtype_promotion("standard"):
        jax.jit(lambda q0: mb.simulate(model, q0, jnp.zeros(3), 0.1, solver="dopri8").q).lower(jnp.zeros(3))
    assert len(calls) <= 1


def test_an_eager_simulation_takes_the_model_packed_and_equals_the_traced_one(caplog):
    """Called eagerly, `simulate` runs its solve as one program taking the model packed
    (`jaxmb._eager`): its setup and diffrax's dispatch flattened a full-body model about
    ten times per call (8.8 ms per call on gait2354 against 0.21 ms for the solve). The
    same structure with other values compiles nothing new and gives its own motion."""
    from jaxmb import _eager

    model = mb.models.planar_chain(3)
    q0, qd0 = jnp.array([0.3, -0.2, 0.1]), jnp.array([0.0, 0.5, -0.5])
    eager = mb.simulate(model, q0, qd0, 0.2, ts=jnp.linspace(0.0, 0.2, 5))
    assert id(model) in _eager._MODELS
    traced = jax.jit(lambda q: mb.simulate(model, q, qd0, 0.2, ts=jnp.linspace(0.0, 0.2, 5)).q)(q0)
    np.testing.assert_allclose(eager.q, traced, rtol=1e-12, atol=1e-14)
    heavier = eqx.tree_at(lambda m: m.bodies[2].mass, model, 3.0 * model.bodies[2].mass)
    ts = jnp.linspace(0.0, 0.2, 5)
    caplog.clear()
    with jax.log_compiles(), caplog.at_level(logging.WARNING):
        other = mb.simulate(heavier, q0, qd0, 0.2, ts=ts)
    assert [r.getMessage()[:80] for r in caplog.records if "Compiling" in r.getMessage()] == []
    assert not np.allclose(other.q[-1], eager.q[-1])
    e0 = mb.kinetic_energy(heavier, q0, qd0) + mb.potential_energy(heavier, q0)
    e1 = mb.kinetic_energy(heavier, other.q[-1], other.qd[-1]) + mb.potential_energy(heavier, other.q[-1])
    np.testing.assert_allclose(e1, e0, rtol=1e-6)


def test_calling_again_outside_jit_compiles_nothing(caplog):
    """A second call with arguments of the same shapes reuses what the first compiled:
    simulate, also for a model whose loop variables ride along in the state (four-bar)
    and are checked at step ends (throw=False), and a loop's solve and joint_values
    (whose Newton and continuation loops, run op by op, would compile every time)."""
    model = mb.models.four_bar(throw=False)
    closure = model.joints[0].function.closure

    def run(q):
        return (mb.simulate(model, q, jnp.zeros(1), 0.2, solver="dopri8"), closure.solve(q),
                mb.joint_values(model, q))

    run(jnp.array([0.0]))
    caplog.clear()
    with jax.log_compiles(), caplog.at_level(logging.WARNING):
        sol, loop, values = run(jnp.array([0.5]))
    assert [r.getMessage()[:80] for r in caplog.records if "Compiling" in r.getMessage()] == []
    assert bool(sol.success) and bool(loop.result == mb.RESULTS.successful)
    np.testing.assert_allclose(values[:3], loop.f, rtol=1e-12)
