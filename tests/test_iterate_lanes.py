"""`iterate_lanes` (jaxmb._batching): a per-lane stopped iteration whose batches compact the
lanes left instead of running every lane to the slowest. Lane by lane the result must be the
single-lane loop's, under `vmap` at any nesting, with lanes that skip and lanes that never
stop; the batched program must really compact (a loop of the whole batch, then a gathered one).
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb._batching import iterate_lanes

MAX_STEPS = 40


def _halve(carry, args):
    """x <- r x until |x| < 1e-3, counting steps: a lane's count is known in closed form."""
    x, k = carry
    (r,) = args
    stop = jnp.abs(x) < 1e-3
    return (jnp.where(stop, x, r * x), jnp.where(stop, k, k + 1)), stop


def _loop(x0, r, skip):
    return iterate_lanes(_halve, MAX_STEPS, (x0, jnp.zeros((), jnp.int32)), (r,), skip)


def _lanes(n, seed=0):
    rng = np.random.default_rng(seed)
    x0 = 10.0 ** rng.uniform(-4, 6, n)  # 0 to 30 steps at r = 1/2
    r = np.full(n, 0.5)
    r[::97] = 1.0  # never stops: MAX_STEPS
    skip = np.zeros(n, bool)
    skip[5::31] = True
    return jnp.asarray(x0), jnp.asarray(r), jnp.asarray(skip)


def _expected_steps(x0, r, skip):
    x0, r, skip = map(np.asarray, (x0, r, skip))
    halvings = np.maximum(np.ceil(np.log2(x0 / 1e-3)), 0).astype(int)
    # A lane stops on the step that finds |x| < 1e-3, so it counts the halvings it made.
    steps = np.where(r == 1.0, np.where(x0 < 1e-3, 0, MAX_STEPS), halvings)
    return np.where(skip, 0, steps)


def test_each_lane_makes_its_own_steps_under_vmap_and_nested_vmap():
    x0, r, skip = _lanes(2000)
    single = jax.jit(lambda a, b, c: _loop(a, b, c))
    flat = jax.jit(jax.vmap(_loop))(x0, r, skip)
    nested = jax.jit(jax.vmap(jax.vmap(_loop)))(*(v.reshape(40, 50) for v in (x0, r, skip)))
    want = _expected_steps(x0, r, skip)
    assert want.max() == MAX_STEPS and want.min() == 0 and len(np.unique(want)) > 20
    for x, k in (flat, jax.tree.map(lambda v: v.reshape(-1), nested)):
        np.testing.assert_array_equal(k, want)
        for i in (0, 5, 97, 1234, 1999):
            xi, ki = single(x0[i], r[i], skip[i])
            assert float(x[i]) == float(xi) and int(k[i]) == int(ki)
    # Unbatched arguments (one factor for all lanes) broadcast to the lanes.
    x, k = jax.jit(jax.vmap(_loop, in_axes=(0, None, 0)))(x0, jnp.asarray(0.5), skip)
    np.testing.assert_array_equal(k, _expected_steps(x0, np.full(2000, 0.5), skip))


def test_a_batch_compacts_the_lanes_left():
    """The batched program holds two loops: the whole batch's, run while more than 1/16
    of it is left, and the gathered lanes' loop (a batch of 64 lanes or fewer holds one)."""
    def loops(n):
        jaxpr = jax.make_jaxpr(jax.vmap(_loop))(*_lanes(n))
        return str(jaxpr).count("while[")

    assert loops(2000) == 2
    assert loops(64) == 1


def test_derivatives_are_the_single_lane_loops():
    """Forward mode (the rule differentiates the plain loop; a while loop has no reverse mode)."""
    x0, r, skip = _lanes(300, seed=1)
    skip = skip.at[:].set(False)

    def plain(x0, r):
        def body(c):
            i, carry, _ = c
            carry, d = _halve(carry, (r,))
            return i + 1, carry, d

        return jax.lax.while_loop(lambda c: (c[0] < MAX_STEPS) & ~c[2], body,
                                  (0, (x0, jnp.zeros((), jnp.int32)), False))[1][0]

    got = jax.jit(jax.vmap(jax.jacfwd(lambda a, b: _loop(a, b, False)[0], argnums=(0, 1))))(x0, r)
    ref = jax.jit(jax.vmap(jax.jacfwd(plain, argnums=(0, 1))))(x0, r)
    for g, f in zip(got, ref):
        np.testing.assert_array_equal(g, f)
    assert float(jnp.max(jnp.abs(got[1]))) > 1.0  # d x / d r = k r^(k-1) x0 is not all zero
