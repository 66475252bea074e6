"""Per-state functions whose batches run in cache-sized chunks.

A per-state dynamics function under a plain `jax.vmap` over thousands of states
becomes a sequence of XLA operations on whole-batch arrays; past a few hundred
states those intermediates no longer fit the CPU's caches and every operation
streams them from memory (measured in docs/dev/performance.md). The
decorator below gives such a function a batching rule that maps `vmap`'s batch
over chunks (`jax.lax.map` with ``batch_size``), so that users write a plain
`jax.vmap` and get the chunked cost.

A second decorator, `batch_last`, serves functions written once for arrays with
an optional trailing batch shape (structure of arrays): under `vmap` the batch
axis is moved last, so that a product of small matrices is an elementwise
product over the contiguous batch axis (vectorised across states) rather than a
batched `dot` over tiny matrices, which XLA's CPU backend runs poorly.

Differentiation sees neither rule: each function is a `jax.custom_jvp` whose
tangent rule is the plain function's, so forward and reverse mode (and their
batches) are those of the undecorated function.
"""

import functools
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap

# States per chunk on CPU (chosen among 16-256 by measuring planar_chain(7) and (20)
# forward dynamics in float64); accelerators take the whole batch.
CHUNK = 128


def _batch_axis_first(x):
    """`x` unchanged, as an operation whose batching rule puts the batch axis first.

    Why: under `vmap` JAX takes a `custom_jvp` call's output batch axes from whichever
    of its function and its tangent rule it traces first. Staged out by `jit`, that is
    the function (the chunking rule: axis 0), and the tangent rule traced later for
    `grad` must agree, while plain batching of its operations may leave the batch on
    another axis (a transposed product). Concatenation's batching rule moves it to
    the front; the empty operand costs nothing once compiled."""
    flat = jnp.reshape(x, (-1,))
    return jnp.reshape(jax.lax.concatenate([flat, jnp.zeros((0,), flat.dtype)], 0), x.shape)


def _chunked(fn: Callable) -> Callable:
    """`fn(*arrays)` (pytrees of arrays) with a batching rule that runs chunks of `CHUNK`."""
    batched = custom_vmap(fn)

    @batched.def_vmap
    def _rule(axis_size, in_batched, *args):
        leaves, treedef = jax.tree.flatten(args)
        flags = jax.tree.leaves(in_batched)
        mapped = [leaf for leaf, flag in zip(leaves, flags) if flag]

        def one(xs):
            it = iter(xs)
            full = [next(it) if flag else leaf for leaf, flag in zip(leaves, flags)]
            return fn(*jax.tree.unflatten(treedef, full))

        if axis_size <= CHUNK or jax.default_backend() != "cpu":
            out = jax.vmap(one)(mapped)
        else:
            out = jax.lax.map(one, mapped, batch_size=CHUNK)
        return out, jax.tree.map(lambda _: True, out)

    return _with_plain_tangents(batched, fn)


def _with_plain_tangents(batched: Callable, fn: Callable) -> Callable:
    """`batched` (a `custom_vmap` of `fn`) whose derivatives are `fn`'s."""

    @jax.custom_jvp
    def call(*args):
        return batched(*args)

    @call.defjvp
    def _tangents(primals, tangents):
        return jax.tree.map(_batch_axis_first, jax.jvp(fn, primals, tangents))

    return call


def _batch_last_call(fn: Callable, params, *arrays):
    """`fn(params, *arrays)`, whose arrays may carry a trailing batch shape, with a
    batching rule that moves `vmap`'s axis last, calls `fn` once and moves it back.

    The arrays `fn` creates from constants (numpy tables, masks) are hoisted into
    arguments of the batched call (as in `batches_in_chunks`): `vmap` batches every
    operand of a `lax.cond` whose predicate is batched, and a batching rule must see
    those as arguments. Where they, or the model's arrays, come batched, the call is
    mapped as `vmap` does (batch first)."""
    consts, program = eqx.partition(eqx.filter_closure_convert(fn, params, *arrays), eqx.is_array)

    def converted(parts, *arrays):
        return eqx.combine(parts[0], program)(parts[1], *arrays)

    batched = custom_vmap(converted)

    @batched.def_vmap
    def _rule(axis_size, in_batched, parts, *arrays):
        if any(jax.tree.leaves(in_batched[0])):
            axes = jax.tree.map(lambda flag: 0 if flag else None, in_batched)
            out = jax.vmap(converted, in_axes=tuple(axes))(parts, *arrays)
        else:
            last = [jnp.moveaxis(x, 0, -1) if flag else jnp.broadcast_to(x[..., None], (*x.shape, axis_size))
                    for x, flag in zip(arrays, in_batched[1:])]
            out = jax.tree.map(lambda y: jnp.moveaxis(y, -1, 0), fn(parts[1], *last))
        return out, jax.tree.map(lambda _: True, out)

    return _with_plain_tangents(batched, converted)((consts, params), *arrays)


def batch_last(fn: Callable) -> Callable:
    """Decorate ``fn(model, *arrays, **static)`` written for arrays of per-state shape
    followed by an optional batch shape (``f`` (n,) or (n, B)) and returning arrays of
    that form: under `jax.vmap` it is called once with the batch as the trailing axis
    of every array. The model's arrays travel as arguments (a batching rule cannot
    close over traced values); a batch of models is mapped as `vmap` does."""

    @functools.wraps(fn)
    def wrapper(model, *arrays, **static_kwargs):
        params, static = eqx.partition(model, eqx.is_array)

        def call(params, *arrays):
            return fn(eqx.combine(params, static), *arrays, **static_kwargs)

        return _batch_last_call(call, params, *arrays)

    return wrapper


def batches_in_chunks(fn: Callable) -> Callable:
    """Decorate ``fn(model, *arrays, **static)``: a `jax.vmap` over it runs in chunks of
    `CHUNK` states on CPU. The model's arrays travel as arguments (a batching rule
    cannot close over traced values); its static part and the keyword arguments
    (static options such as ``method``) are closed over."""

    @functools.wraps(fn)
    def wrapper(model, *args, **static_kwargs):
        params, static = eqx.partition(model, eqx.is_array)

        def per_state(params, *arrays):
            return fn(eqx.combine(params, static), *arrays, **static_kwargs)

        # The arrays the function creates from constants (numpy tables, masks) are
        # hoisted into arguments: `vmap` batches every operand of a `lax.cond` whose
        # predicate is batched, and a batching rule must see those as arguments too.
        consts, program = eqx.partition(eqx.filter_closure_convert(per_state, params, *args), eqx.is_array)

        def call(consts, *arrays):
            return eqx.combine(consts, program)(*arrays)

        return _chunked(call)(consts, params, *args)

    return wrapper
