"""First-order activation dynamics: the rate of activation from excitation and activation."""

import abc

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._checks import float_array
from ._musculotendon import bounded_parameter, positive_parameters


class AbstractActivationDynamics(eqx.Module):
    """First-order dynamics ``da/dt = f(u, a)`` of a muscle's activation ``a`` driven by its
    excitation ``u`` (both in [0, 1]); call ``dynamics(excitation, activation)``."""

    @abc.abstractmethod
    def __call__(self, excitation: Float[ArrayLike, "*b"], activation: Float[ArrayLike, "*b"]) -> Float[Array, "*b"]:
        """``da/dt`` (1/s)."""


class FirstOrderActivation(AbstractActivationDynamics):
    """Thelen (2003)'s first-order activation dynamics, as OpenSim's
    ``MuscleFirstOrderActivationDynamicModel`` (used by ``Thelen2003Muscle``):

    ``da/dt = (u - a) / tau``, ``tau = tau_act (0.5 + 1.5 a)`` when ``u > a``,
    ``tau = tau_deact / (0.5 + 1.5 a)`` otherwise, with ``a`` clamped to ``[a_min, 1]``.

    **Arguments:** `activation_time_constant` (s, 0.015), `deactivation_time_constant`
    (s, 0.05), `minimum_activation` (0.01); array leaves.
    """

    activation_time_constant: Float[Array, ""]
    deactivation_time_constant: Float[Array, ""]
    minimum_activation: Float[Array, ""]

    def __init__(self, activation_time_constant=0.015, deactivation_time_constant=0.05, minimum_activation=0.01):
        self.activation_time_constant = float_array(activation_time_constant)
        self.deactivation_time_constant = float_array(deactivation_time_constant)
        self.minimum_activation = float_array(minimum_activation)
        positive_parameters(self, ("activation_time_constant", "deactivation_time_constant"), "FirstOrderActivation")
        bounded_parameter(self, "minimum_activation", 0.0, 1.0, "FirstOrderActivation", high_open=True)

    def __call__(self, excitation, activation):
        a = jnp.clip(activation, self.minimum_activation, 1.0)
        u = jnp.asarray(excitation)
        factor = 0.5 + 1.5 * a
        rate = jnp.where(u > a, 1.0 / (self.activation_time_constant * factor),
                         factor / self.deactivation_time_constant)
        return (u - a) * rate


class DeGrooteActivation(AbstractActivationDynamics):
    """De Groote et al. (2016)'s smooth activation dynamics (supplement Eq. S5, as OpenSim's
    ``DeGrooteFregly2016Muscle``):

    ``da/dt = [ f / (tau_act (0.5 + 1.5 a)) + (1 - f)(0.5 + 1.5 a) / tau_deact ] (u - a)``,
    ``f = 0.5 tanh(b (u - a)) + 0.5``.

    **Arguments:** `activation_time_constant` (s, 0.015), `deactivation_time_constant`
    (s, 0.06), `smoothing` (``b``, 0.1 as published; OpenSim recommends 10); array leaves.
    """

    activation_time_constant: Float[Array, ""]
    deactivation_time_constant: Float[Array, ""]
    smoothing: Float[Array, ""]

    def __init__(self, activation_time_constant=0.015, deactivation_time_constant=0.06, smoothing=0.1):
        self.activation_time_constant = float_array(activation_time_constant)
        self.deactivation_time_constant = float_array(deactivation_time_constant)
        self.smoothing = float_array(smoothing)
        positive_parameters(self, ("activation_time_constant", "deactivation_time_constant", "smoothing"),
                            "DeGrooteActivation")

    def __call__(self, excitation, activation):
        a, u = jnp.asarray(activation), jnp.asarray(excitation)
        factor = 0.5 + 1.5 * a
        f = 0.5 * jnp.tanh(self.smoothing * (u - a))
        rate = (f + 0.5) / (self.activation_time_constant * factor) + (0.5 - f) * factor / self.deactivation_time_constant
        return rate * (u - a)
