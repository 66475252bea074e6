"""Construction checks of path points and wrap objects: a bad value is refused where the
object is built (a ModelError naming the object), not found later as a NaN length."""

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import finite, float_array, violated
from .._errors import ModelError


def vector3(x, what: str):
    """A finite 3-vector (m or rad)."""
    x = float_array(x, what=what)
    if x.shape != (3,):
        raise ModelError(f"{what}: expected shape (3,), got {x.shape}.")
    return finite(x, what)


def scalar(x, what: str):
    """A finite scalar of the default float dtype."""
    x = float_array(x, float, what=what)
    if x.shape != ():
        raise ModelError(f"{what}: expected a scalar, got shape {x.shape}.")
    return finite(x, what)


def positive(x, what: str):
    """`x` (a float array: a radius, a length, semi-axes), refused unless every entry is > 0."""
    if violated(lambda v: v > 0.0, x):
        raise ModelError(f"{what} must be positive, got {np.asarray(x).tolist()}.")
    return x


def finite_leaves(tree, what: str):
    """Every array in the pytree `tree` (e.g. a joint function's coefficients) is finite."""
    for leaf in jax.tree_util.tree_leaves(tree):
        if hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jnp.inexact):
            finite(leaf, what)
    return tree
