"""NaN-safe primitives: values and derivatives stay finite at the degenerate inputs.

Each function guards its argument before the operation whose derivative would be
infinite or undefined (a zero vector's norm, sqrt at 0, arccos at ±1, a division by
0), so that no `jnp.where` branch that is not taken can put a NaN into a gradient.
"""

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, Int

__all__ = ["norm", "unit", "sqrt0", "acos", "dsign", "safe_div"]


def norm(v: Float[ArrayLike, "*batch 3"]) -> Float[Array, "*batch"]:
    """``|v|`` over the last axis, with gradient 0 (not NaN) at ``v = 0``."""
    s = jnp.sum(v * v, axis=-1)
    pos = s > 0.0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, s, 1.0)), 0.0)


def unit(v: Float[ArrayLike, "*batch 3"]) -> Float[Array, "*batch 3"]:
    """``v / |v|``, or 0 for ``v = 0`` (OpenSim's NormalizeOrZero), NaN-free."""
    n = norm(v)
    return v / jnp.where(n > 0.0, n, 1.0)[..., None]


def sqrt0(x: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    """``sqrt(x)`` for ``x > 0``, 0 otherwise (gradient 0 there)."""
    pos = x > 0.0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, 1.0)), 0.0)


def acos(x: Float[ArrayLike, "*batch"]) -> Float[Array, "*batch"]:
    """``arccos(x)`` with `x` clipped strictly inside [-1, 1], so that the gradient stays finite."""
    return jnp.arccos(jnp.clip(x, -1.0 + 1e-15, 1.0 - 1e-15))


def dsign(x: Float[ArrayLike, "*batch"]) -> Int[Array, "*batch"]:
    """OpenSim's DSIGN: +1 for ``x >= 0``, -1 otherwise."""
    return jnp.where(x >= 0.0, 1, -1)


def safe_div(a: Float[ArrayLike, "..."], b: Float[ArrayLike, "..."]) -> Float[Array, "..."]:
    """``a / b`` where ``b != 0``, 0 where ``b == 0`` (gradient 0 there)."""
    ok = b != 0.0
    return jnp.where(ok, a / jnp.where(ok, b, 1.0), 0.0)
