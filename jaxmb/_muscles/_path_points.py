"""The points of a musculotendon path: fixed, conditional (present while a coordinate lies
in a range) and moving (body-frame location a function of ``q``)."""

import abc

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from .._checks import float_array, violated
from .._errors import ModelError
from .._functions import AbstractJointFunction
from ._checks import finite, finite_leaves, vector3
from .._typing import RealLike

# OpenSim's ConditionalPathPoint is active iff range[0] - 1e-5 <= c <= range[1] + 1e-5
# (observed with OpenSim 4.6, tests/data/opensim/README.md).
CONDITIONAL_SLACK = 1e-5


class AbstractPathPoint(eqx.Module):
    """A point of a musculotendon path, on `body` ('ground' is the fixed frame).

    `moves` (class attribute): whether the body-frame location depends on ``q``;
    `conditional`: whether the point can leave the path (`is_active`).
    """

    body: eqx.AbstractVar[str]
    name: eqx.AbstractVar[str]
    moves: eqx.AbstractClassVar[bool]
    conditional: eqx.AbstractClassVar[bool]

    @abc.abstractmethod
    def location(self, q: Float[Array, " nq"]) -> Float[Array, "3"]:
        """Location in the body frame at ``q`` (m)."""

    @abc.abstractmethod
    def is_active(self, q: Float[Array, " nq"]) -> Bool[Array, ""]:
        """Whether the point is part of the path at ``q``."""


class PathPoint(AbstractPathPoint):
    """A point fixed at `location` (m, body frame) on `body`.

    **Arguments:**

    - `body`: the body's name (``"ground"`` for the fixed frame).
    - `location`: (3,) the point in the body frame, m, finite.
    - `name`: the point's name (error messages).

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] for a location that is not 3 finite numbers.
    """

    body: str = eqx.field(static=True)
    location_: Float[Array, "3"]
    name: str = eqx.field(static=True)
    moves = False
    conditional = False

    def __init__(self, body: str, location: RealLike, name: str = ""):
        self.body = str(body)
        self.location_ = vector3(location, f"PathPoint {name!r} location")
        self.name = str(name)

    def location(self, q):
        return self.location_.astype(q.dtype)

    def is_active(self, q):
        return jnp.asarray(True)


class ConditionalPathPoint(AbstractPathPoint):
    """A fixed point that is part of the path only while ``range[0] - 1e-5 <= c(q) <= range[1] + 1e-5``
    (OpenSim's inclusive test with its 1e-5 slack, `CONDITIONAL_SLACK`).

    `coordinate` is the OpenSim coordinate as a joint function of ``q`` (a
    dependent coordinate is its coupling function). The path length jumps where
    the point switches in or out; `path_events` reports the state.

    **Arguments:**

    - `body`: the body's name.
    - `location`: (3,) the point in the body frame, m, finite.
    - `coordinate`: the joint function ``c(q)`` (rad or m).
    - `range`: (2,) the interval of ``c`` where the point is active, rad or m, finite.
    - `name`: the point's name.

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] for a `coordinate` that is not a joint function, or a bad
    location or range.
    """

    body: str = eqx.field(static=True)
    location_: Float[Array, "3"]
    coordinate: AbstractJointFunction
    range: Float[Array, "2"]
    name: str = eqx.field(static=True)
    moves = False
    conditional = True

    def __init__(self, body: str, location: RealLike, coordinate: AbstractJointFunction,
                 range: RealLike, name: str = ""):
        self.body = str(body)
        self.location_ = vector3(location, f"ConditionalPathPoint {name!r} location")
        if not isinstance(coordinate, AbstractJointFunction):
            raise ModelError(f"ConditionalPathPoint {name!r}: coordinate must be a joint function of q.")
        self.coordinate = coordinate
        self.range = float_array(range, float)
        if self.range.shape != (2,):
            raise ModelError(f"ConditionalPathPoint {name!r}: range must have two values.")
        finite(self.range, f"ConditionalPathPoint {name!r} range")
        if violated(lambda r: r[0] <= r[1], self.range):  # an empty interval: the point is never on the path
            raise ModelError(f"ConditionalPathPoint {name!r}: range {np.asarray(self.range).tolist()} must be "
                             "(lower, upper) with lower <= upper.")
        self.name = str(name)

    def location(self, q):
        return self.location_.astype(q.dtype)

    def is_active(self, q):
        c = self.coordinate(q)
        return (c >= self.range[0] - CONDITIONAL_SLACK) & (c <= self.range[1] + CONDITIONAL_SLACK)


class ClampedCoordinate(AbstractJointFunction):
    """``f(q) = clip(inner(q), lower, upper)``: OpenSim's MovingPathPoint evaluates its
    functions at the coordinate value clamped to the coordinate's range (observed
    with OpenSim 4.6 even for coordinates with ``clamped = false``)."""

    inner: AbstractJointFunction
    lower: Float[Array, ""]
    upper: Float[Array, ""]

    def __init__(self, inner: AbstractJointFunction, lower, upper):
        self.inner = inner
        self.lower = float_array(lower, float)
        self.upper = float_array(upper, float)
        if violated(np.less_equal, self.lower, self.upper):  # also refuses NaN
            raise ModelError(f"ClampedCoordinate: the range ({float(self.lower)}, {float(self.upper)}) is not an "
                             "interval.")

    def __call__(self, q):
        return jnp.clip(self.inner(q), self.lower, self.upper)

    def coordinate_indices(self):
        return self.inner.coordinate_indices()


class MovingPathPoint(AbstractPathPoint):
    """A point whose body-frame coordinates x, y, z (m) are joint functions of ``q``.

    OpenSim's MovingPathPoint: each coordinate is a function of an OpenSim
    coordinate (wrapped in `ClampedCoordinate`, as OpenSim 4.6 clamps it to its range).

    **Arguments:**

    - `body`: the body's name.
    - `x`, `y`, `z`: joint functions of ``q`` giving the body-frame coordinates, m
      ([`jaxmb.Constant`][jaxmb.Constant] for a fixed one).
    - `name`: the point's name.

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] for an argument that is not a joint function or has
    non-finite parameters.
    """

    body: str = eqx.field(static=True)
    x: AbstractJointFunction
    y: AbstractJointFunction
    z: AbstractJointFunction
    name: str = eqx.field(static=True)
    moves = True
    conditional = False

    def __init__(self, body: str, x: AbstractJointFunction, y: AbstractJointFunction,
                 z: AbstractJointFunction, name: str = ""):
        self.body = str(body)
        for label, fn in (("x", x), ("y", y), ("z", z)):
            if not isinstance(fn, AbstractJointFunction):
                raise ModelError(f"MovingPathPoint {name!r}: {label} must be a joint function of q "
                                 f"(use jaxmb.Constant for a fixed coordinate).")
            finite_leaves(fn, f"MovingPathPoint {name!r} {label} (the function's parameters)")
        self.x, self.y, self.z = x, y, z
        self.name = str(name)

    def location(self, q):
        return jnp.stack([self.x(q), self.y(q), self.z(q)]).astype(q.dtype)

    def is_active(self, q):
        return jnp.asarray(True)
