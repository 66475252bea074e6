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

Third, `iterate_lanes` runs a stopped iteration (a step repeated until a lane's own
test says done) so that under `vmap` the lanes left after most have stopped are
gathered and step on their own, instead of every lane running to the slowest.
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


def _chunked(fn: Callable, chunk: int = CHUNK) -> Callable:
    """`fn(*arrays)` (pytrees of arrays) with a batching rule that runs chunks of `chunk`
    states on CPU (1: one state at a time)."""
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

        if axis_size <= chunk or jax.default_backend() != "cpu":
            out = jax.vmap(one)(mapped)
        else:
            out = jax.lax.map(one, mapped, batch_size=chunk if chunk > 1 else None)
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


def batches_in_chunks(fn: Callable | None = None, *, chunk: int = CHUNK) -> Callable:
    """Decorate ``fn(model, *arrays, **static)``: a `jax.vmap` over it runs in chunks of
    `chunk` states on CPU (default `CHUNK`; 1 maps the states one at a time). The model's
    arrays travel as arguments (a batching rule cannot close over traced values); its
    static part and the keyword arguments (static options such as ``method``) are closed
    over."""
    if fn is None:
        return functools.partial(batches_in_chunks, chunk=chunk)

    @functools.wraps(fn)
    def wrapper(model, *args, **static_kwargs):
        params, static = eqx.partition(model, eqx.is_array)
        # Weakly typed leaves (a Python float in the model) made strong: the batching rule's
        # call would strip the weak type, and the converted function checks its arguments'.
        params = jax.tree.map(lambda x: jnp.asarray(x, jnp.result_type(x)), params)

        def per_state(params, *arrays):
            return fn(eqx.combine(params, static), *arrays, **static_kwargs)

        # The arrays the function creates from constants (numpy tables, masks) are
        # hoisted into arguments: `vmap` batches every operand of a `lax.cond` whose
        # predicate is batched, and a batching rule must see those as arguments too.
        consts, program = eqx.partition(eqx.filter_closure_convert(per_state, params, *args), eqx.is_array)

        def call(consts, *arrays):
            return eqx.combine(consts, program)(*arrays)

        return _chunked(call, chunk)(consts, params, *args)

    return wrapper


# Compaction of per-lane iterations (`iterate_lanes`): the whole batch steps together until
# at most 1/_SHRINK of its lanes are left, which then step on their own, gathered.
_SHRINK = 16
_MIN_GATHER = 64  # batches this small step together to the end


def iterate_lanes(step: Callable, max_steps: int, carry, args, done):
    """Per lane, OpenSim's kind of stopped iteration: ``while not done and fewer than
    max_steps steps: carry, done = step(carry, args)``, with `step` a function of one lane
    (closing over no traced value: everything it reads comes in `args`).

    Under `jax.vmap` (any nesting: the lanes of every level are flattened into one batch)
    a `lax.while_loop` would run every lane to the slowest lane's count, paying the whole
    batch's width on every trip; the Newton solves of a wrap stop after 3 to 17 steps,
    but one lane in a few thousand runs to `max_steps`. Here the batch steps together
    only while more than 1/16 of it is left; the lanes left are then gathered into a
    batch of that width and step to the end there, and scattered back. Each lane makes
    the steps it makes alone, so the result is the single-lane loop's, lane by lane.

    **Arguments:**

    - `step`: ``step(carry, args) -> (carry, done)`` for one lane.
    - `max_steps`: the most steps a lane makes (static).
    - `carry`, `args`: pytrees of arrays of one lane; `done`: bool, a lane that makes no step.

    **Returns:**

    `carry` after the lane's steps. Its derivatives are those of the single-lane loop
    (forward mode through it, any order; a `while_loop` has no reverse mode): callers
    that differentiate a wide batch of solves carry sensitivities in `carry` instead, as
    the ellipsoid's closest-point Newton does.
    """
    return _lane_loop(step, max_steps)(carry, args, jnp.asarray(done, bool))


def _lane_loop(step, max_steps):
    def single(carry, args, done):
        def body(c):
            i, x, _ = c
            x, d = step(x, args)
            return i + 1, x, d

        return jax.lax.while_loop(lambda c: (c[0] < max_steps) & ~c[2], body, (0, carry, done))[1]

    batched = _lanes_batch(step, max_steps)
    loop = custom_vmap(single)

    @loop.def_vmap
    def _rule(axis_size, in_batched, carry, args, done):
        x = _broadcast_unbatched((carry, args, done), in_batched, axis_size)
        out = batched(*x, jnp.zeros(axis_size, jnp.int32))[0]
        return out, jax.tree.map(lambda _: True, out)

    return _with_plain_tangents(loop, single)


def _broadcast_unbatched(tree, in_batched, size):
    in_batched = tuple(in_batched)  # a list from `custom_vmap`
    return jax.tree.map(lambda x, b: x if b else jnp.broadcast_to(x, (size, *jnp.shape(x))), tree, in_batched)


def where_lanes(mask, new, old):
    """`new` where the leading-axis `mask` (B,) is True, else `old` (pytrees of (B, ...) arrays)."""
    return jax.tree.map(lambda a, b: jnp.where(jnp.reshape(mask, mask.shape + (1,) * (a.ndim - 1)), a, b), new, old)


def _lanes_batch(step, max_steps):
    """`iterate_lanes` over a leading batch axis of every array (``count``: steps made so
    far per lane), compacting once; under a further `vmap` the two batch axes merge."""

    def stepping(carry, args, done, count, keep_going):
        def body(s):
            x, d, c = s
            live = ~d & (c < max_steps)
            nx, nd = jax.vmap(step)(x, args)
            return where_lanes(live, nx, x), d | (live & nd), c + live.astype(c.dtype)

        return jax.lax.while_loop(lambda s: keep_going(~s[1] & (s[2] < max_steps)), body, (carry, done, count))

    def run(carry, args, done, count):
        B = done.shape[0]
        w = B // _SHRINK
        if B <= _MIN_GATHER:
            return stepping(carry, args, done, count, jnp.any)
        carry, done, count = stepping(carry, args, done, count, lambda live: jnp.sum(live) > w)
        live = ~done & (count < max_steps)
        idx = jnp.nonzero(live, size=w, fill_value=B)[0]
        take = lambda x: jnp.take(x, idx, axis=0, mode="clip")  # noqa: E731
        sub = jax.tree.map(take, (carry, args, count))
        sx, sd, sc = stepping(sub[0], sub[1], idx >= B, sub[2], jnp.any)
        put = lambda x, y: x.at[idx].set(y, mode="drop")  # noqa: E731
        return jax.tree.map(put, carry, sx), put(done, sd), put(count, sc)

    batched = custom_vmap(run)

    @batched.def_vmap
    def _rule(axis_size, in_batched, carry, args, done, count):
        x = _broadcast_unbatched((carry, args, done, count), in_batched, axis_size)
        flat = jax.tree.map(lambda y: jnp.reshape(y, (-1, *y.shape[2:])), x)
        out = batched(*flat)
        out = jax.tree.map(lambda y: jnp.reshape(y, (axis_size, -1, *y.shape[1:])), out)
        return out, jax.tree.map(lambda _: True, out)

    return batched


@custom_vmap
def batch_max(n):
    """`n`, and under `jax.vmap` its maximum over the batch, unbatched: a `lax.cond` on it
    stays a branch (on a batched predicate it would run both branches). For predicates that
    only choose how a result is computed, not what it is."""
    return n


@batch_max.def_vmap
def _batch_max_rule(axis_size, in_batched, n):
    return (jnp.max(n, axis=0) if in_batched[0] else n), False


def live_first(live, length, fill):
    """Lane indices along the last axis, the `live` ones first (in order), padded with
    `fill` to `length`."""
    order = jnp.argsort(~live, axis=-1, stable=True)
    pad = jnp.full((*live.shape[:-1], length - live.shape[-1]), fill, order.dtype)
    return jnp.concatenate([order, pad], axis=-1)


def in_rounds(body, carry, rounds: int, width: int, count):
    """``carry = body(carry, r)`` for the rounds r < `rounds` that hold some of `count`
    live lanes, `width` per round (under `vmap` the batch's most): a scan of `lax.cond`,
    which both modes of differentiation go through (a while loop has no reverse mode)."""
    most = batch_max(count)

    def one(c, r):
        return jax.lax.cond(r * width < most, lambda c: body(c, r), lambda c: c, c), None

    return jax.lax.scan(one, carry, jnp.arange(rounds))[0]
