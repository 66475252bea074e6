"""Public calls compiled once per model structure, called eagerly or inside a trace.

Outside `jit`, JAX runs a function operation by operation, tracing it again on every
call (docs/dev/performance.md has what that cost jaxmb's kinematics, energies and
muscle forces). `compiled_per_model` gives such a call's body one program per model
structure and argument shapes (``eqx.filter_jit``, cached on the static parts). Inside
a trace (a user's `jit`, `vmap` or `grad`, or jaxmb's own programs, which call these
functions as building blocks) the same nested `jit` is inlined by XLA, and JAX reuses
its traced body across the enclosing traces of a model: without it, every `jit`,
`jacfwd` or `vmap` of a muscle model traced the whole geometry again
(docs/dev/performance.md). Every public call on a model and a state (kinematics, dynamics,
muscle geometry and forces, the force set) goes through this one wrapper.

An eager call passes the model to its program as a few flat buffers, one per dtype,
made once per model object (`model_packing`): a full-body model is a pytree of thousands of
small arrays, and flattening it and handing each array to the program cost a
millisecond per call, many times the program's own run time. A model is immutable, so
its buffers stay valid for as long as it lives; they are dropped with it. A program
that fails inside (an ``eqx.error_if``) is explained at the call where the decorated
function says how (a loop that cannot close raises its `LoopClosureError`).
"""

import dataclasses
import functools
import weakref
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._checks import is_concrete


def compiled_per_model(fn: Callable | None = None, *, check_model: Callable[[Any], None] | None = None,
                       explain: Callable[..., None] | None = None) -> Callable:
    """Decorate ``fn(model, *arrays, **static)``: it runs as one compiled program
    (``eqx.filter_jit``; nested, and so inlined, where its arguments are traced). Its
    callers convert and check their arguments first (a Python number or list would be a
    static argument and compile per value).

    Eagerly, ``check_model(model)``, where given, runs once per model object, before its
    first program: it raises what the program cannot see, its arguments being traced
    (copies of a loop that disagree). Where the program raises (an ``eqx.error_if``:
    `EquinoxRuntimeError`), ``explain(*args, **kwargs)`` runs to raise the precise error
    at the call instead (a loop that cannot close: its `LoopClosureError`), at no cost
    to the calls that succeed."""
    if fn is None:
        return functools.partial(compiled_per_model, check_model=check_model, explain=explain)
    compiled = eqx.filter_jit(fn)

    # The eager route, the model packed: `eqx.filter_jit` (not `jax.jit`), which turns an
    # `eqx.error_if` raised inside the program (a loop that cannot close) into an
    # `EquinoxRuntimeError` with the message; one per function, as `compiled`.
    def packed_call(skeleton, buffers, args, kwargs):
        return fn(skeleton.unpack(buffers), *args, **kwargs)

    packed_call.__name__ = packed_call.__qualname__ = fn.__name__  # the program's name in logs and profiles
    compiled_packed = eqx.filter_jit(packed_call)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        # The model's own arrays are looked at once per model object (`model_packing`).
        eager = bool(args) and is_concrete((args[1:], kwargs))
        packed = model_packing(args[0]) if eager else None
        try:
            if packed is None:
                return compiled(*args, **kwargs)
            if check_model is not None and check_model not in packed.checked:
                check_model(args[0])
                packed.checked.add(check_model)
            return compiled_packed(packed.skeleton, packed.buffers, args[1:], kwargs)
        except eqx.EquinoxRuntimeError:
            if packed is not None and explain is not None:
                explain(*args, **kwargs)
            raise

    return call


@dataclasses.dataclass(frozen=True, eq=False)
class _Skeleton:
    """A model's structure: its treedef, its static leaves (None where an array is), and
    where each array lies in the buffers (buffer, offset, shape; None for a static leaf).
    Hashable by value (a static argument of the program) and interned (`_SKELETONS`),
    so that models of one structure share one object, which the program's cache finds
    by identity."""

    treedef: Any
    static: tuple
    slots: tuple

    def __post_init__(self):
        object.__setattr__(self, "_hash", hash((self.treedef, self.static, self.slots)))

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return self is other or (isinstance(other, _Skeleton) and (self.treedef, self.static, self.slots)
                                 == (other.treedef, other.static, other.slots))

    def unpack(self, buffers):
        leaves = [s if slot is None else buffers[slot[0]][slot[1]:slot[1] + int(np.prod(slot[2], dtype=int))]
                  .reshape(slot[2]) for s, slot in zip(self.static, self.slots)]
        return jax.tree_util.tree_unflatten(self.treedef, leaves)


@dataclasses.dataclass(frozen=True)
class _Packing:
    skeleton: _Skeleton
    buffers: tuple
    checked: set = dataclasses.field(default_factory=set)  # the `check_model`s passed


# id(model) -> (weak reference to it, its packing). Entries leave with their model.
_MODELS: dict[int, tuple[weakref.ref, _Packing]] = {}
# hash -> weak reference to the interned skeleton of that hash. The packings and the
# compiled programs hold their skeletons; one that nothing holds leaves the table.
_SKELETONS: dict[int, weakref.ref] = {}


def model_packing(model) -> _Packing | None:
    """The model's buffers and skeleton (made on its first eager call), or None where it
    cannot be packed: traced leaves (a `grad` with respect to the model), NumPy arrays,
    leaves on several devices, unhashable static leaves, or an object without weak
    references."""
    entry = _MODELS.get(id(model))
    if entry is not None and entry[0]() is model:
        return entry[1]
    leaves, treedef = jax.tree_util.tree_flatten(model)
    if not is_concrete(leaves):
        return None
    groups: dict[tuple, tuple[int, list]] = {}  # (dtype, weak type) -> (buffer index, arrays)
    sizes: list[int] = []
    slots, static = [], []
    for leaf in leaves:
        if eqx.is_array(leaf):
            if not isinstance(leaf, jax.Array):
                return None  # a NumPy array can change in place: the model is handed over as it is
            index, group = groups.setdefault((leaf.dtype, leaf.weak_type), (len(groups), []))
            if index == len(sizes):
                sizes.append(0)
            group.append(leaf)
            slots.append((index, sizes[index], leaf.shape))
            sizes[index] += leaf.size
            static.append(None)
        else:
            slots.append(None)
            static.append(leaf)
    try:
        skeleton = _interned(_Skeleton(treedef, tuple(static), tuple(slots)))
        with jax.ensure_compile_time_eval():  # concrete buffers, also when called inside a trace
            buffers = tuple(_concatenate(group) for _, group in groups.values())
        ref = weakref.ref(model, functools.partial(_forget, id(model)))
    except (TypeError, ValueError):
        return None
    packing = _Packing(skeleton, buffers)
    _MODELS[id(model)] = (ref, packing)
    return packing


def _interned(skeleton: _Skeleton) -> _Skeleton:
    """The live skeleton equal to `skeleton`, else `skeleton` itself, now interned (a hash
    taken by an unequal live skeleton leaves the new one uninterned: correct, only not shared)."""
    key = hash(skeleton)
    ref = _SKELETONS.get(key)
    known = None if ref is None else ref()
    if known is None:
        _SKELETONS[key] = weakref.ref(skeleton, functools.partial(_forget_skeleton, key))
        return skeleton
    return known if known == skeleton else skeleton


def _forget_skeleton(key, ref):
    if _SKELETONS.get(key) is ref:
        del _SKELETONS[key]


@jax.jit
def _concatenate(arrays):
    # One program per group of arrays (an eager `ravel` per leaf costs more than the call).
    return jnp.concatenate([a.ravel() for a in arrays])


def _forget(key, ref):
    if key in _MODELS and _MODELS[key][0] is ref:
        del _MODELS[key]
