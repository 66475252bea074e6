"""The family of Hill-type musculotendon force models: a contractile fibre in parallel with a
passive element, pennated at constant thickness, in series with a rigid or compliant tendon.

Each final model (`Thelen2003Muscle`, `Millard2012EquilibriumMuscle`,
`DeGrooteFregly2016Muscle`) supplies its normalised curves; the geometry (OpenSim's ``MuscleFixedWidthPennationModel``), the rigid-tendon fibre
length and the compliant-tendon equilibrium are computed here, once for the whole family.

The compliant-tendon equilibrium is a bracketed Newton iteration of fixed length on the fibre
length along the tendon (vectorises under `jax.vmap` without a per-lane while loop), finished by
two Newton steps whose derivatives are the implicit-function theorem's
(``dx/dtheta = -(dr/dx)^-1 dr/dtheta``, and the second derivatives too; the solve itself is
under `jax.lax.stop_gradient`).
"""

import abc
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._errors import ModelError
from .._safe import safe_div, sqrt0
from .._checks import entries_where, flag, float_array, is_concrete, positive_values, violated

_NEWTON_ITERATIONS = 24
"""Bracketed Newton steps of the equilibrium solve: each step at least halves the bracket, so
24 steps resolve a fibre length to 2^-24 of the bracket (tendon force from 0 to 5 F_max) whatever
the start, and Newton's quadratic convergence takes the residual to round-off in fewer steps."""

SIGNIFICANT_REAL = 1.4901161193847656e-08  # SimTK::SignificantReal (sqrt of machine epsilon)

# What a musculotendon model's inputs must hold: the force models clamp an activation
# silently (or scale by it: De Groote's force doubles at a = 2), and a non-positive length
# (a fitted path far from its samples) gives a pushing muscle. The unit interval has a
# margin of 1e-3: central differences at a bound (an optimizer's constraint Jacobian) step
# just outside it, and the models' clamps are what they expect there. NaN fails each.
UNIT_SLACK = 1e-3
INPUT_DOMAINS = {"activation": ("in [0, 1]", lambda x: (x >= -UNIT_SLACK) & (x <= 1.0 + UNIT_SLACK)),
                 "length": ("positive", lambda x: x > 0.0),
                 "lengthening_speed": ("finite (m/s)", lambda x: (x > -np.inf) & (x < np.inf))}


class MusculotendonForces(eqx.Module):
    """The state of a musculotendon unit at one (activation, length, lengthening speed).

    **Fields** (SI units): `fiber_length` (m), `pennation_angle` (rad), `fiber_velocity`
    (m/s, positive when lengthening), `tendon_length` (m), `active_fiber_force` and
    `passive_fiber_force` (N, along the fibre; passive includes damping),
    `fiber_force_along_tendon` (N), `tendon_force` (N), `active_force_length`,
    `passive_force_length`, `force_velocity` (the normalised multipliers), and
    `equilibrium_residual` (N: fibre force along the tendon minus tendon force; 0 for a rigid
    tendon).

    A compliant tendon's equilibrium is sought between the fibre's shortest length and the
    tendon force 5 `F_max` (the bracket of OpenSim's De Groote model). Where it lies outside,
    the state is the bracket's end: a tendon at 5 `F_max` for a unit stretched so far that its
    fibre would pull harder, the fibre at its shortest for a unit shorter than its slack
    tendon. The forces are then finite but not in equilibrium, and `equilibrium_residual`
    says by how much (read it from [`jaxmb.muscle_states`][jaxmb.muscle_states]).
    """

    fiber_length: Float[Array, "*b"]
    pennation_angle: Float[Array, "*b"]
    fiber_velocity: Float[Array, "*b"]
    tendon_length: Float[Array, "*b"]
    active_fiber_force: Float[Array, "*b"]
    passive_fiber_force: Float[Array, "*b"]
    fiber_force_along_tendon: Float[Array, "*b"]
    tendon_force: Float[Array, "*b"]
    active_force_length: Float[Array, "*b"]
    passive_force_length: Float[Array, "*b"]
    force_velocity: Float[Array, "*b"]
    equilibrium_residual: Float[Array, "*b"]


def positive_parameters(obj, names, what: str):
    """Refuse non-positive or infinite values of the parameters `names` of `obj`, NaN
    included: a ModelError beginning with `what` (the element named), naming the parameter
    and its value."""
    positive_values(what, **{p: getattr(obj, p) for p in names})


def bounded_parameter(obj, p: str, low: float, high: float, what: str, *, high_open: bool = False):
    """Refuse a value of parameter `p` of `obj` outside ``[low, high]`` (``[low, high)`` with
    `high_open`), NaN included: a ModelError beginning with `what` (the element named)."""
    def inside(x):
        return (x >= low) & ((x < high) if high_open else (x <= high))

    v = getattr(obj, p)
    if violated(inside, v):
        flat = np.ravel(np.asarray(v))
        shown = float(flat[np.argmin(inside(flat))])
        raise ModelError(f"{what}: {p} must be in [{low:g}, {high:g}{')' if high_open else ']'}, got {shown}.")


def real_parameters(obj, name: str, **values) -> None:
    """Set each of `values` on `obj` (in its `__init__`) as a float array; a complex value
    raises naming the muscle `name` and the parameter."""
    for field, value in values.items():
        setattr(obj, field, float_array(value, what=f"muscle {name!r}: {field}"))


def init_common(obj, max_isometric_force, optimal_fiber_length, tendon_slack_length, pennation_angle_at_optimal,
                max_contraction_velocity, compliant_tendon, name):
    """Set (and check) the parameters every model of the family has, in its `__init__`."""
    real_parameters(obj, name, max_isometric_force=max_isometric_force, optimal_fiber_length=optimal_fiber_length,
                    tendon_slack_length=tendon_slack_length, pennation_angle_at_optimal=pennation_angle_at_optimal,
                    max_contraction_velocity=max_contraction_velocity)
    obj.compliant_tendon = flag(compliant_tendon, f"muscle {name!r}: compliant_tendon")
    positive_parameters(obj, ("max_isometric_force", "optimal_fiber_length", "tendon_slack_length",
                              "max_contraction_velocity"), f"muscle {name!r}")
    # OpenSim's pennation models refuse an angle beyond pi/2 - SignificantReal (its muscles
    # would have no fibre along the tendon); equality is refused too here, a measure-zero difference.
    bounded_parameter(obj, "pennation_angle_at_optimal", 0.0, math.pi / 2 - SIGNIFICANT_REAL, f"muscle {name!r}",
                      high_open=True)



class AbstractMusculotendonModel(eqx.Module):
    """A Hill-type musculotendon force model (Zajac 1989): force from activation ``a``,
    musculotendon length ``l_MT`` and lengthening speed ``v_MT``.

    With fibre length ``l``, optimal length ``l_o``, the constant thickness
    ``h = l_o sin(alpha_o)`` gives the pennation ``sin(phi) = h / l`` and the fibre length along
    the tendon ``l cos(phi) = sqrt(l^2 - h^2)``; the tendon length is
    ``l_T = l_MT - l cos(phi)``. The fibre force is
    ``F_M = F_max (a f_L(l/l_o) f_V(v/(v_max l_o)) + f_PE(l/l_o) + beta v/(v_max l_o))``.

    - Rigid tendon (`compliant_tendon` False): ``l_T = l_s`` (the tendon slack length),
      ``v = v_MT cos(phi)``, tendon force ``F_M cos(phi)``.
    - Compliant tendon: ``l`` solves the equilibrium ``F_M cos(phi) = F_max f_T(l_T/l_s)``,
      the fibre velocity during that solve being the model's (see each final class), and the
      tendon force is ``F_max f_T``.

    Every numeric parameter is an array leaf: `jax.grad` and `jax.vmap` reach all of them.
    Call the model (``model(a, l_MT, v_MT)``) for a [`jaxmb.MusculotendonForces`][jaxmb.MusculotendonForces];
    [`jaxmb.muscle_forces`][jaxmb.muscle_forces] evaluates all the muscles of a model at once.
    """

    max_isometric_force: eqx.AbstractVar[Float[Array, ""]]
    optimal_fiber_length: eqx.AbstractVar[Float[Array, ""]]
    tendon_slack_length: eqx.AbstractVar[Float[Array, ""]]
    pennation_angle_at_optimal: eqx.AbstractVar[Float[Array, ""]]
    max_contraction_velocity: eqx.AbstractVar[Float[Array, ""]]
    compliant_tendon: eqx.AbstractVar[bool]

    # -- what each model supplies ------------------------------------------------------------
    @abc.abstractmethod
    def _activation(self, a):
        """The activation that scales the active force (e.g. clamped to a minimum)."""

    @abc.abstractmethod
    def _fiber_multipliers(self, a, l_norm, v_norm):
        """(f_L, f_PE, f_V, damping) at normalised fibre length and velocity; ``a`` as returned
        by ``_activation``; damping is the non-conservative passive force / F_max."""

    @abc.abstractmethod
    def _tendon_multiplier(self, lt_norm):
        """Normalised tendon force at normalised tendon length."""

    @abc.abstractmethod
    def _tendon_length_at_five(self):
        """The normalised tendon length at which the tendon force is 5 F_max (the equilibrium's
        bracket: OpenSim's De Groote model bounds the normalised tendon force by [0, 5])."""

    @abc.abstractmethod
    def _minimum_fiber_length_along_tendon(self):
        """The smallest fibre length along the tendon the model allows (m)."""

    @abc.abstractmethod
    def _equilibrium_fiber_velocity(self, a, l, l_mt, v_mt):
        """The fibre velocity (m/s) the compliant equilibrium uses at fibre length ``l``."""

    @abc.abstractmethod
    def _clamp_fiber_state(self, x, v, active, passive, fv):
        """(v, active, passive, fv) after the model's rule for a fibre at its shortest (``x`` the
        fibre length along the tendon), e.g. OpenSim's Millard model zeroes the fibre forces."""

    @abc.abstractmethod
    def _opensim_rigid_tendon_cosine(self, fiber_length, cos_phi):
        """The factor OpenSim 4.6's ``calcInextensibleTendonActiveFiberForce`` (its static
        optimization's ``F_A``) applies to the active fibre force of a rigid tendon, where the
        force along the tendon would take ``cos_phi`` (`static_optimization`'s
        ``active_force="opensim"``)."""

    # -- geometry (constant-thickness pennation, OpenSim's MuscleFixedWidthPennationModel) ---
    def fiber_width(self) -> Float[Array, ""]:
        """The constant thickness ``h = l_o sin(alpha_o)`` (m)."""
        return self.optimal_fiber_length * jnp.sin(self.pennation_angle_at_optimal)

    def _geometry(self, x):
        """Fibre length, cos and sin of pennation from the fibre length along the tendon ``x``."""
        h = self.fiber_width()
        l = sqrt0(x * x + h * h)
        return l, safe_div(x, l), safe_div(h, l)

    def _fiber_force(self, a, l, cos_phi, v):
        lo, vmax = self.optimal_fiber_length, self.max_contraction_velocity
        fl, fpe, fv, damping = self._fiber_multipliers(a, l / lo, v / (vmax * lo))
        active = self.max_isometric_force * a * fl * fv
        passive = self.max_isometric_force * (fpe + damping)
        return active, passive, (fl, fpe, fv)

    def _residual(self, x, a, l_mt, v_mt):
        """Fibre force along the tendon minus tendon force (N) at fibre length along tendon x."""
        l, cos_phi, _ = self._geometry(x)
        v = self._equilibrium_fiber_velocity(a, l, l_mt, v_mt)
        active, passive, _ = self._fiber_force(a, l, cos_phi, v)
        tendon = self.max_isometric_force * self._tendon_multiplier((l_mt - x) / self.tendon_slack_length)
        return (active + passive) * cos_phi - tendon

    def _equilibrium_x(self, a, l_mt, v_mt):
        """Fibre length along the tendon at equilibrium, differentiable by the implicit-function
        theorem (see the module docstring)."""
        lo = jnp.maximum(jnp.maximum(self._minimum_fiber_length_along_tendon(), 1e-4 * self.optimal_fiber_length),
                         l_mt - self.tendon_slack_length * self._tendon_length_at_five())
        hi = jnp.maximum(l_mt - self.tendon_slack_length, lo)
        args = jax.lax.stop_gradient((self, a, l_mt, v_mt))

        def res(x):
            m, a_, l_, v_ = args
            return m._residual(x, a_, l_, v_)

        def step(_, carry):
            x, lo_, hi_ = carry
            r, dr = jax.jvp(res, (x,), (jnp.ones_like(x),))
            lo_ = jnp.where(r < 0.0, x, lo_)
            hi_ = jnp.where(r < 0.0, hi_, x)
            newton = x - safe_div(r, dr)
            ok = (dr > 0.0) & (newton >= lo_) & (newton <= hi_)
            return jnp.where(ok, newton, 0.5 * (lo_ + hi_)), lo_, hi_

        lo_s, hi_s = jax.lax.stop_gradient((lo, hi))
        x0 = 0.5 * (lo_s + hi_s)
        x, _, _ = jax.lax.fori_loop(0, _NEWTON_ITERATIONS, step, (x0, lo_s, hi_s))
        x = jax.lax.stop_gradient(x)

        def newton(z):  # differentiable in (z, theta)
            r, dr = jax.jvp(lambda y: self._residual(y, a, l_mt, v_mt), (z,), (jnp.ones_like(z),))
            return z - safe_div(r, dr)

        # Two more Newton steps, differentiable: at the root the Newton map N has dN/dx = 0, so
        # N(N(x)) has the root's first derivative -(dr/dx)^-1 dr/dtheta and also its second
        # (what a derivative of a derivative, e.g. the compliant static optimization's, needs).
        x1 = newton(x)
        x2 = newton(x1)
        # Where the bracket closed on a jump of the residual instead of a root (a model whose
        # fibre velocity switches, e.g. Thelen's as the tendon goes slack), no Newton step is
        # taken: a step from the jump's other side leaves the bracket (Thelen's unit shortening
        # at 0.7 v_max ended with its fibre 0.1 m long past the whole unit, the tendon at 130 F_max).
        tol = 1e-6 * self.optimal_fiber_length
        converged = jax.lax.stop_gradient((jnp.abs(x1 - x) <= tol) & (jnp.abs(x2 - x) <= tol)
                                          & (x2 >= lo_s) & (x2 <= hi_s))
        at_bound = jax.lax.stop_gradient(res(lo_s) >= 0.0) | (hi_s <= lo_s)
        return jnp.where(at_bound, lo, jnp.where(converged, x2, x))

    # -- the public evaluation ---------------------------------------------------------------
    def __call__(self, activation: Float[ArrayLike, ""], length: Float[ArrayLike, ""],
                 lengthening_speed: Float[ArrayLike, ""]) -> MusculotendonForces:
        """The musculotendon state at one (activation, l_MT (m), v_MT (m/s)); scalars (use
        `jax.vmap` for batches). Returns a [`jaxmb.MusculotendonForces`][jaxmb.MusculotendonForces].
        Called with values at hand (not under ``jit``), raises a ``ValueError`` for an
        activation outside [0, 1] (beyond a margin of 1e-3), a length that is not positive,
        or a NaN; `jaxmb.muscle_forces` checks under ``jit`` too."""
        return self._state(*self._checked(activation, length, lengthening_speed), self.compliant_tendon)

    def inextensible_tendon_state(self, activation: Float[ArrayLike, ""], length: Float[ArrayLike, ""],
                                  lengthening_speed: Float[ArrayLike, ""]) -> MusculotendonForces:
        """The musculotendon state with the tendon taken as rigid (length ``l_s``) whatever
        `compliant_tendon` says: what OpenSim's ``calcInextensibleTendonActiveFiberForce`` and its
        static optimization use. Scalars; returns a
        [`jaxmb.MusculotendonForces`][jaxmb.MusculotendonForces]; checked as a call is."""
        return self._state(*self._checked(activation, length, lengthening_speed), False)

    def _checked(self, activation, length, lengthening_speed):
        """The public calls' arguments, checked against `INPUT_DOMAINS` where their values are
        at hand (the force curves clamp an activation silently, and a NaN length gives a
        plausible force through the equilibrium's bracket). Not under ``jit``, where
        `jaxmb.muscle_forces` checks its vectors itself and calls `_state` directly: with an
        ``eqx.error_if`` here, XLA's CPU backend at optimisation level 0 with the fusion
        emitters off (the test suite's setting; jaxlib 0.10.2) miscompiled the Millard model's
        batched program, its active force-length value 0.2% off at a lane whose result then
        depended on the batch's size (175 lanes wrong, 30 right, the same HLO right at level 2;
        the curve's own Newton converges to round-off there, so no conditioning explains it)."""
        out = [float_array(x) for x in (activation, length, lengthening_speed)]
        if not all(is_concrete(x) for x in out):
            return out  # traced: unchecked, as the rigid-body functions are under jit
        for (name, (words, ok)), x in zip(INPUT_DOMAINS.items(), out):
            entries_where(x, ok, type(self).__name__, name, words, lambda bad, x=x: repr(float(np.ravel(x)[bad[0]])))
        return out

    def _state(self, activation, length, lengthening_speed, compliant):
        a_in = float_array(activation)
        l_mt, v_mt = float_array(length), float_array(lengthening_speed)
        if a_in.ndim or l_mt.ndim or v_mt.ndim:  # else an error from deep inside the equilibrium's loop
            raise ValueError(f"{type(self).__name__}: activation, length and lengthening_speed are scalars, got "
                             f"shapes {a_in.shape}, {l_mt.shape} and {v_mt.shape}; map over a batch with jax.vmap, "
                             "or use jaxmb.muscle_forces for every muscle of a model.")
        a = self._activation(a_in)
        if compliant:
            x = self._equilibrium_x(a, l_mt, v_mt)
            l, cos_phi, sin_phi = self._geometry(x)
            v = self._equilibrium_fiber_velocity(a, l, l_mt, v_mt)
            lt = l_mt - x
            tendon = self.max_isometric_force * self._tendon_multiplier(lt / self.tendon_slack_length)
        else:
            x = jnp.maximum(l_mt - self.tendon_slack_length, self._minimum_fiber_length_along_tendon())
            l, cos_phi, sin_phi = self._geometry(x)
            v = v_mt * cos_phi
            lt = jnp.broadcast_to(self.tendon_slack_length, jnp.shape(x))
            tendon = None
        active, passive, (fl, fpe, fv) = self._fiber_force(a, l, cos_phi, v)
        v, active, passive, fv = self._clamp_fiber_state(x, v, active, passive, fv)
        along = (active + passive) * cos_phi
        if tendon is None:
            tendon = along
        phi = jnp.arcsin(jnp.clip(sin_phi, 0.0, 1.0 - 1e-15))
        return MusculotendonForces(
            fiber_length=l, pennation_angle=phi, fiber_velocity=v, tendon_length=lt,
            active_fiber_force=active, passive_fiber_force=passive, fiber_force_along_tendon=along,
            tendon_force=tendon, active_force_length=fl, passive_force_length=fpe, force_velocity=fv,
            equilibrium_residual=along - tendon)

    def tendon_force(self, activation: Float[ArrayLike, ""], length: Float[ArrayLike, ""],
                     lengthening_speed: Float[ArrayLike, ""]) -> Float[Array, ""]:
        """The tendon force (N) at one (activation, l_MT (m), v_MT (m/s)): the force the
        musculotendon unit applies along its path."""
        return self(activation, length, lengthening_speed).tendon_force
