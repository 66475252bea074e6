"""The tendon forces of all the muscles of a model at once."""

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._checks import entries_where, finite_entries, flag, real_argument
from .._eager import compiled_per_model
from .._errors import ModelError
from ._musculotendon import INPUT_DOMAINS, MusculotendonForces


_MISSING = {
    "force_model": ("has no force model: jaxmb computes the forces of Thelen2003Muscle, "
                    "Millard2012EquilibriumMuscle and DeGrooteFregly2016Muscle; give it one with "
                    "eqx.tree_at(lambda m: m.force_model, muscle, jaxmb.DeGrooteFregly2016Muscle(...), "
                    "is_leaf=lambda x: x is None)."),
    "activation_dynamics": ("has no activation dynamics; give it one with "
                            "eqx.tree_at(lambda m: m.activation_dynamics, muscle, jaxmb.FirstOrderActivation(), "
                            "is_leaf=lambda x: x is None)."),
}


def _groups(model, part="force_model"):
    """Muscle indices grouped by the structure of their `part` (class, static options): one vmap each."""
    groups = {}
    for i, m in enumerate(model.muscles):
        if getattr(m, part) is None:
            raise ModelError(f"muscle {m.name!r} ({m.kind}) {_MISSING[part]}")
        groups.setdefault(jax.tree_util.tree_structure(getattr(m, part)), []).append(i)
    return list(groups.values())


def _per_muscle(model, part, fn, *arrays):
    """``fn(muscle.<part>, *arrays[i])`` for every muscle, vmapped over the muscles whose `part`
    shares a structure (parameters stacked), in `model.muscle_names` order."""
    outs, order = [], []
    for idx in _groups(model, part):
        stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *[getattr(model.muscles[i], part) for i in idx])
        sel = jnp.asarray(idx)
        outs.append(jax.vmap(fn)(stacked, *(x[sel] for x in arrays)))
        order.extend(idx)
    inverse = jnp.argsort(jnp.asarray(order))
    return jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs)[inverse], *outs)


def _per_muscle_vectors(caller: str, model, **arrays) -> list[Array]:
    """The `arrays` as real JAX arrays (integers promoted; complex numbers and arrays under
    explicit sharding refused, `real_argument`), each checked: shape ``(n_muscles,)`` and finite (eagerly
    a ``ValueError`` naming the muscles; under ``jit`` through ``eqx.error_if``). A NaN
    activation or length would otherwise come out as a plausible force: the models'
    clamps and equilibrium solves do not carry NaN through."""
    n = len(model.muscles)
    out = []
    for what, x in arrays.items():
        x = real_argument(x, caller, what)
        if x.shape != (n,):
            raise ValueError(f"{caller}: {what} must have shape ({n},) (one per muscle of "
                             f"{model.name!r}), got {x.shape}; use jax.vmap for batches.")
        x = finite_entries(x, caller, what, model.muscle_names, f"muscles {{}} of {model.name!r}")
        out.append(_in_domain(x, caller, what, model) if what in _DOMAINS else x)
    return out


# What the per-muscle arguments must hold beyond finiteness: the force models' domains
# (`INPUT_DOMAINS`, with the same margin on the unit interval for excitations).
_DOMAINS = {"activations": INPUT_DOMAINS["activation"], "excitations": INPUT_DOMAINS["activation"],
            "lengths": INPUT_DOMAINS["length"]}


def _in_domain(x, caller: str, what: str, model):
    """`x`, checked entry by entry against `_DOMAINS[what]` (`entries_where`), naming the muscles."""
    words, ok = _DOMAINS[what]
    return entries_where(x, ok, caller, what, words, lambda bad: f"{np.asarray(x)[bad].tolist()} for the muscles "
                         f"{[model.muscle_names[i] for i in bad]} of {model.name!r}")


def muscle_states(model, activations: ArrayLike, lengths: ArrayLike,
                  lengthening_speeds: ArrayLike, *, inextensible_tendon: bool = False) -> MusculotendonForces:
    """The full musculotendon state of every muscle of `model`: fibre length, pennation, fibre
    velocity, active and passive fibre force, tendon force (Thelen 2003; Millard et al. 2013;
    De Groote et al. 2016),
    vectorised as [`jaxmb.muscle_forces`][jaxmb.muscle_forces] is.

    **Arguments:** as [`jaxmb.muscle_forces`][jaxmb.muscle_forces]: `model`, `activations`,
    `lengths` (m), `lengthening_speeds` (m/s), each ``(n_muscles,)``; `inextensible_tendon`: True
    to take every tendon as rigid (`AbstractMusculotendonModel.inextensible_tendon_state`, as
    OpenSim's static optimization does), False (default) for each model's own tendon.

    **Returns:** a [`jaxmb.MusculotendonForces`][jaxmb.MusculotendonForces] whose fields have
    shape ``(n_muscles,)``, in `model.muscle_names` order.
    """
    a, l_mt, v_mt = _per_muscle_vectors("muscle_states", model, activations=activations, lengths=lengths,
                                        lengthening_speeds=lengthening_speeds)
    return _states(model, a, l_mt, v_mt, inextensible_tendon=inextensible_tendon)


def musculotendon_states(model, a, l_mt, v_mt, *, inextensible_tendon: bool = False) -> MusculotendonForces:
    """`muscle_states` without its checks, for callers whose arrays are checked already
    (a simulation's state by its step guard, static optimization's by its motion)."""
    if flag(inextensible_tendon, "muscle_states: inextensible_tendon"):
        return _per_muscle(model, "force_model", lambda fm, x, y, z: fm._state(x, y, z, False), a, l_mt, v_mt)
    return _per_muscle(model, "force_model", lambda fm, x, y, z: fm._state(x, y, z, fm.compliant_tendon),
                       a, l_mt, v_mt)


ACTIVE_FORCES = ("along_tendon", "opensim")


def rigid_tendon_forces(model, l_mt, v_mt, active_force: str = "along_tendon"):
    """Every muscle's ``(F_A, F_P)`` with a rigid tendon at full activation, (n_muscles,)
    each, N: the active and passive fibre forces along the tendon (static optimization's
    ``a F_A + F_P``). ``active_force="opensim"`` takes ``F_A`` as OpenSim 4.6's
    ``calcInextensibleTendonActiveFiberForce`` computes it (each force model's
    ``_opensim_rigid_tendon_cosine``): the same for Thelen 2003, the fibre force itself for
    De Groote et al. 2016, and a pennation angle from the normalised fibre length for
    Millard et al. 2013."""
    n = len(model.muscles)
    state = musculotendon_states(model, jnp.ones(n, l_mt.dtype), l_mt, v_mt, inextensible_tendon=True)
    cos_phi = jnp.cos(state.pennation_angle)
    if active_force == "opensim":
        factor = _per_muscle(model, "force_model", lambda fm, x, c: fm._opensim_rigid_tendon_cosine(x, c),
                             state.fiber_length, cos_phi)
    else:
        factor = cos_phi
    return state.active_fiber_force * factor, state.passive_fiber_force * cos_phi


def activation_rates(model, excitations: ArrayLike, activations: ArrayLike) -> Float[Array, " n_muscles"]:
    """``da/dt`` of every muscle of `model` by its own activation dynamics
    (`Muscle.activation_dynamics`: Thelen 2003's first order, De Groote et al. 2016's
    smooth one), vectorised over the muscles that share a class.

    **Arguments:** `model`; `excitations` ``(n_muscles,)`` in [0, 1]; `activations`
    ``(n_muscles,)``.

    **Returns:** ``(n_muscles,)`` activation rates (1/s), in `model.muscle_names` order.

    **Raises:** [`jaxmb.ModelError`][jaxmb.ModelError] naming a muscle without activation
    dynamics; ``ValueError`` for arrays of the wrong shape, not finite, or outside [0, 1]
    by more than 1e-3 (under ``jit`` an ``eqx.EquinoxRuntimeError``).
    """
    u, a = _per_muscle_vectors("activation_rates", model, excitations=excitations, activations=activations)
    return _activation_rates(model, u, a)


def musculotendon_activation_rates(model, u, a) -> Float[Array, " n_muscles"]:
    """`activation_rates` without its checks (a simulation's state is checked by its step guard)."""
    if not len(model.muscles):
        return jnp.zeros((0,), a.dtype)
    return _per_muscle(model, "activation_dynamics", lambda dyn, x, y: dyn(x, y), u, a)


def muscle_forces(model, activations: ArrayLike, lengths: ArrayLike,
                  lengthening_speeds: ArrayLike) -> Float[Array, "n_muscles"]:
    """The tendon force of every muscle of `model`, each by its own force model
    (`Muscle.force_model`; Thelen 2003, Millard et al. 2013, De Groote et al. 2016), vectorised over the muscles that
    share a model class (one `jax.vmap` per class, parameters stacked as arrays).

    The generalized force of the muscles is ``mb.moment_arms(model, q) @ F`` (``R = -dL/dq``,
    Ehsani 2016, Eq. 195), with ``lengths = mb.muscle_lengths(model, q)`` and
    ``lengthening_speeds = mb.muscle_lengthening_speeds(model, q, qd)``.

    **Arguments:**

    - `model`: a model whose muscles all have a force model.
    - `activations`: ``(n_muscles,)``, in [0, 1].
    - `lengths`: ``(n_muscles,)`` musculotendon lengths (m), positive.
    - `lengthening_speeds`: ``(n_muscles,)`` (m/s, positive when lengthening).

    **Returns:** ``(n_muscles,)`` tendon forces (N), in `model.muscle_names` order.

    **Raises:** [`jaxmb.ModelError`][jaxmb.ModelError] naming a muscle without a force model;
    ``ValueError`` for arrays of the wrong shape, not finite, activations outside [0, 1]
    (by more than 1e-3: central differences at a bound pass) or lengths not positive
    (under ``jit`` an ``eqx.EquinoxRuntimeError``).
    """
    if not model.muscles:
        return jnp.zeros((0,))
    a, l_mt, v_mt = _per_muscle_vectors("muscle_forces", model, activations=activations, lengths=lengths,
                                        lengthening_speeds=lengthening_speeds)
    return _states(model, a, l_mt, v_mt).tendon_force


# The public calls' bodies, compiled once per muscle set and argument shapes when called
# eagerly (`jaxmb._eager`): they would otherwise run operation by operation, the compliant
# tendons' equilibrium solves included (docs/dev/performance.md).
_states = compiled_per_model(musculotendon_states)
_activation_rates = compiled_per_model(musculotendon_activation_rates)
