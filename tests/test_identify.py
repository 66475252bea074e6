"""Parameter identification (`jaxmb.identify`): the parameters that made a motion are
recovered from it, by Levenberg-Marquardt to round-off (the identification page's example,
run and checked by `test_readme.py`) and by optax's Adam towards the same point; the forward-mode Jacobian Levenberg-Marquardt uses and the reverse-mode
gradient optax uses agree; failures and bad input are named."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jaxmb as mb
from models_for_tests import muscled_elbow

TS = jnp.linspace(0.0, 1.0, 21)
Q0, QD0 = jnp.array([0.6, -0.4]), jnp.array([0.0, 0.5])
TAU = jnp.array([0.5, -0.2])  # breaks the invariance of the motion under a common scaling of the masses
GUESS = mb.models.double_pendulum()
TRUTH = (0.8, 1.3)


def _masses(m):
    return m.bodies[0].mass, m.bodies[1].mass


def _measured():
    true = eqx.tree_at(_masses, GUESS, tuple(jnp.asarray(x) for x in TRUTH))
    return mb.simulate(true, Q0, QD0, TS[-1], ts=TS, tau=TAU, rtol=1e-12, atol=1e-12).q


MEASURED = _measured()


def test_adam_descends_towards_the_same_masses():
    residuals = mb.trajectory_residuals(TS, MEASURED, Q0, QD0, tau=TAU, rtol=1e-10, atol=1e-10,
                                        adjoint=diffrax.RecursiveCheckpointAdjoint())
    fit = mb.identify(GUESS, _masses, residuals, solver=optax.adam(5e-2), max_steps=150, positive=True)
    assert fit.result == mb.RESULTS.successful and fit.history.shape == (150,) and int(fit.steps) == 150
    assert float(fit.loss) < 1e-5 * float(fit.history[0])
    np.testing.assert_allclose(jnp.stack(fit.parameters), TRUTH, rtol=3e-3)


def test_forward_jacobian_and_reverse_gradient_agree():
    """Levenberg-Marquardt's Jᵀr (forward mode through the simulation) is the gradient of ½‖r‖²
    that optax takes (reverse mode through diffrax's checkpointed adjoint)."""
    kw = dict(tau=TAU, rtol=1e-10, atol=1e-10)
    forward = mb.trajectory_residuals(TS, MEASURED, Q0, QD0, **kw)
    reverse = mb.trajectory_residuals(TS, MEASURED, Q0, QD0, adjoint=diffrax.RecursiveCheckpointAdjoint(), **kw)

    def at(fn, masses):
        return fn(eqx.tree_at(_masses, GUESS, (masses[0], masses[1])))

    x = jnp.array([1.0, 1.0])
    J = jax.jit(jax.jacfwd(lambda m: at(forward, m)))(x)
    r = jax.jit(lambda m: at(forward, m))(x)
    g = jax.jit(jax.grad(lambda m: 0.5 * jnp.sum(at(reverse, m) ** 2)))(x)
    # Both differentiate the same discrete solve (the steps fixed): equal to round-off.
    np.testing.assert_allclose(J.T @ r, g, rtol=1e-12)
    assert float(jnp.min(jnp.abs(g))) > 1e-3


class _Steps(eqx.Module):
    level: jax.Array

    def __call__(self, t):
        return self.level


def test_a_muscles_strength_from_the_motion_its_excitations_drive():
    """A flexor's max isometric force (De Groote et al. 2016, rigid tendon) from the motion
    two muscles produce under constant excitations; the controller, which holds the model,
    is rebuilt from the model being fitted (`trajectory_residuals`' controller factory)."""
    model = muscled_elbow([(name, side, mb.DeGrooteFregly2016Muscle(fmax, 0.12, 0.12, 0.1, 10.0, compliant_tendon=False),
                            mb.DeGrooteActivation(smoothing=10.0))
                           for name, side, fmax in (("flexor", "flexor", 300.0), ("extensor", "extensor", 400.0))])

    def strength(m):
        return m.muscles[0].force_model.max_isometric_force

    def excitations(m):
        return mb.control.MuscleExcitations(m, _Steps(jnp.array([0.6, 0.3])), activation0=jnp.array([0.1, 0.2]))

    true = eqx.tree_at(strength, model, jnp.asarray(360.0))
    ts, q0, qd0 = jnp.linspace(0.0, 0.3, 11), jnp.array([0.8]), jnp.zeros(1)
    measured = mb.simulate(true, q0, qd0, 0.3, ts=ts, controller=excitations(true), rtol=1e-11, atol=1e-11).q
    residuals = mb.trajectory_residuals(ts, measured, q0, qd0, controller=excitations, rtol=1e-11, atol=1e-11)
    fit = mb.identify(model, strength, residuals, positive=True)
    assert fit.result == mb.RESULTS.successful
    np.testing.assert_allclose(fit.parameters, 360.0, rtol=1e-9)


def test_a_fit_that_stops_short_is_reported():
    residuals = mb.trajectory_residuals(TS, MEASURED, Q0, QD0, tau=TAU, rtol=1e-12, atol=1e-12)
    fit = mb.identify(GUESS, _masses, residuals, positive=True, max_steps=2, throw=False)
    assert fit.result == mb.RESULTS.identification_failed
    with pytest.raises(eqx.EquinoxRuntimeError, match="parameter fit did not reach its tolerance"):
        mb.identify(GUESS, _masses, residuals, positive=True, max_steps=2)


def test_an_optax_fit_that_ends_above_its_start_is_reported():
    """An optax fit takes exactly max_steps steps, and one that diverged (a step size too
    large: measured 0.54 -> 0.86, the masses 1 -> 5.7 and 3.1 kg) reported success."""
    residuals = mb.trajectory_residuals(TS, MEASURED, Q0, QD0, tau=TAU, adjoint=diffrax.RecursiveCheckpointAdjoint())
    fit = mb.identify(GUESS, _masses, residuals, solver=optax.sgd(2.0), max_steps=6, throw=False)
    assert float(fit.loss) > float(fit.history[0]) and fit.result == mb.RESULTS.identification_failed
    with pytest.raises(eqx.EquinoxRuntimeError, match="ended above its initial loss"):
        mb.identify(GUESS, _masses, residuals, solver=optax.sgd(2.0), max_steps=6)


def test_bad_input_is_named():
    residuals = mb.trajectory_residuals(TS, MEASURED, Q0, QD0)
    with pytest.raises(ValueError, match="floating-point arrays"):
        mb.identify(GUESS, lambda m: m.coordinate_names, residuals)
    with pytest.raises(ValueError, match="every initial parameter must be > 0"):
        mb.identify(GUESS, lambda m: m.bodies[0].com, residuals, positive=True)
    with pytest.raises(ValueError, match="solver must be 'levenberg_marquardt' or an optax"):
        mb.identify(GUESS, _masses, residuals, solver="adam")
    with pytest.raises(ValueError, match=r"q_measured must have shape \(T, nq\) with T = len\(ts\) = 21"):
        mb.trajectory_residuals(TS, MEASURED[:-1], Q0, QD0)


@pytest.mark.parametrize("max_steps, rtol, atol, match", [
    (0, 1e-10, 1e-10, "max_steps must be an integer >= 1, got 0"),
    (-3, 1e-10, 1e-10, "max_steps must be an integer >= 1, got -3"),
    (10, -1.0, 1e-10, "rtol must be a positive finite number, got -1.0"),
    (10, 1e-10, float("nan"), "atol must be a positive finite number, got nan"),
])
def test_solver_settings_that_cannot_work_are_named(max_steps, rtol, atol, match):
    """Before: max_steps=0 ended in 'did not reach its tolerance' after compiling the fit;
    rtol=-1 reported success."""
    residuals = mb.trajectory_residuals(TS, MEASURED, Q0, QD0, tau=TAU)
    with pytest.raises(ValueError, match=match):
        mb.identify(GUESS, _masses, residuals, max_steps=max_steps, rtol=rtol, atol=atol)


def test_measurements_that_would_fit_silently_wrong_are_named():
    """Before: a (T, 1) column against a 2-coordinate model broadcast into residuals; a
    NaN sample, decreasing times and NaN weights ended in a runtime error about the fit's
    tolerance or inside the simulation."""
    with pytest.raises(ValueError, match=r"q_measured has shape \(21, 1\), but the model simulates 2 coordinates"):
        mb.identify(GUESS, _masses, mb.trajectory_residuals(TS, MEASURED[:, :1], Q0, QD0, tau=TAU))
    with pytest.raises(ValueError, match=r"q_measured is not finite at samples \[3\]"):
        mb.trajectory_residuals(TS, MEASURED.at[3, 1].set(jnp.nan), Q0, QD0)
    with pytest.raises(ValueError, match="ts must hold at least two finite sample times, strictly increasing"):
        mb.trajectory_residuals(TS[::-1], MEASURED, Q0, QD0)
    with pytest.raises(ValueError, match=r"weights must have shape \(nq,\) or \(T, nq\) = \(2,\) or \(21, 2\), got \(3,\)"):
        mb.trajectory_residuals(TS, MEASURED, Q0, QD0, weights=jnp.ones(3))
    for bad in (jnp.array([jnp.nan, 1.0]), jnp.array([-1.0, 1.0])):
        with pytest.raises(ValueError, match="weights must be finite and non-negative"):
            mb.trajectory_residuals(TS, MEASURED, Q0, QD0, weights=bad)


def test_float32_parameters_with_float64_tolerances_are_named():
    """The defaults (1e-10) are for float64: a float32 fit could never meet them."""
    guess = eqx.tree_at(_masses, GUESS, (jnp.float32(1.0), jnp.float32(1.0)))
    residuals = mb.trajectory_residuals(TS, MEASURED, Q0, QD0, tau=TAU)
    with pytest.raises(ValueError, match=r"identify: rtol=1e-10 is below what float32 can resolve .*jax_enable_x64"):
        mb.identify(guess, _masses, residuals)
