"""Annotation aliases: what public functions accept where an array is meant."""

from collections.abc import Sequence
from typing import Union

from jaxtyping import ArrayLike

#: An array, a scalar, or a (nested) sequence of numbers: anything ``jnp.asarray`` takes.
RealLike = Union[ArrayLike, Sequence]
