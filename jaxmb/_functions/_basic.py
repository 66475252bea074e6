"""Elementary joint functions: a coordinate, a constant, affine and polynomial maps,
composition, scaling and any user JAX callable."""

import abc
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._checks import float_array, real_numbers
from .._errors import ModelError
from .._typing import RealLike
from ._base import AbstractJointFunction, _check_finite, coordinate_index, read_coordinate


class _AbstractParametric(AbstractJointFunction):
    """A pure function of its array parameters: several of one kind and shape may be
    evaluated as one batched function (`vectorisable`)."""

    def vectorisable(self):
        return True


class _AbstractWrapper(AbstractJointFunction):
    """A function of the joint function `inner` (and of the others in `_wrapped`):
    it reads the coordinates `inner` reads, and it is vectorisable where all of them are."""

    inner: eqx.AbstractVar[AbstractJointFunction]

    @abc.abstractmethod
    def _wrapped(self) -> tuple[AbstractJointFunction, ...]:
        """Every joint function this one evaluates."""

    def vectorisable(self):
        return all(fn.vectorisable() for fn in self._wrapped())

    def coordinate_indices(self):
        return self.inner.coordinate_indices()


def _sequence(values, owner: str, name: str) -> tuple:
    """`values` as a tuple, a single index refused by name (``Linear(0, ...)`` for ``Linear((0,), ...)``)."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ModelError(f"{owner}: {name} must be a sequence of coordinate indices, got {values!r}; "
                         f"write ({values!r},) for one.")
    return tuple(values)


class Coordinate(AbstractJointFunction):
    """``f(q) = q[index]``: the joint variable is a generalized coordinate itself.

    **Arguments:**

    - `index`: the coordinate ``q[index]`` (0-based); the joint variable has its units
      (rad or m).
    """

    index: int = eqx.field(static=True)

    def __init__(self, index: int):
        self.index = coordinate_index(index, "Coordinate")

    def __call__(self, q):
        return read_coordinate(q, self.index, "Coordinate")

    def coordinate_indices(self):
        return (self.index,)

    def rates_and_gradient(self, q, qd):
        return q[self.index], qd[self.index], jnp.zeros((), q.dtype), jnp.zeros_like(q).at[self.index].set(1.0)


class Constant(AbstractJointFunction):
    """``f(q) = value``: a locked joint (OpenSim's locked coordinate or Constant).

    **Arguments:**

    - `value`: the constant joint variable (rad or m), finite.

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] if `value` is not a finite scalar.
    """

    value: Float[Array, ""]

    def __init__(self, value: RealLike):
        self.value = real_numbers(value, "Constant joint function: value")
        if self.value.ndim:  # a joint variable is a scalar; an array broadcast into the pose
            raise ModelError(f"Constant joint function: value must be a scalar, got shape {self.value.shape}.")
        _check_finite("Constant joint function", "give a finite value.", value=self.value)

    def __call__(self, q):
        return self.value.astype(q.dtype)

    def coordinate_indices(self):
        return ()


class Linear(_AbstractParametric):
    """``f(q) = offset + Σ_k weights[k] q[indices[k]]`` (affine in several coordinates).

    The double pendulum's relative elbow angle ``θ2 - θ1`` is
    ``Linear((0, 1), (-1.0, 1.0))``.

    **Arguments:**

    - `indices`: the k coordinates it reads.
    - `weights`: (k,) weights, in joint units per coordinate unit.
    - `offset`: the constant term, in the joint variable's units (rad or m).

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] for weights of another length than `indices`, an offset that
    is not a scalar, or non-finite values.
    """

    indices: tuple[int, ...] = eqx.field(static=True)
    weights: Float[Array, " k"]
    offset: Float[Array, ""]

    def __init__(self, indices: Sequence[int], weights: RealLike, offset: RealLike = 0.0):
        self.indices = tuple(coordinate_index(i, "Linear") for i in _sequence(indices, "Linear", "indices"))
        self.weights = real_numbers(weights, "Linear joint function: weights")
        self.offset = real_numbers(offset, "Linear joint function: offset")
        if self.offset.ndim:  # a joint variable is a scalar: a vector failed at build naming no joint
            raise ModelError(f"Linear joint function: offset must be a scalar, got shape {self.offset.shape}.")
        if self.weights.shape != (len(self.indices),):
            raise ModelError(
                f"Linear joint function: {len(self.indices)} indices but weights of "
                f"shape {self.weights.shape}; give one weight per coordinate index."
            )
        _check_finite(f"Linear joint function of coordinates {self.indices}",
                      "give finite weights and offset.", weights=self.weights, offset=self.offset)

    def __call__(self, q):
        if self.indices:
            read_coordinate(q, max(self.indices), "Linear")
        idx = jnp.asarray(self.indices, dtype=int)
        return self.offset + jnp.dot(self.weights, q[idx])

    def coordinate_indices(self):
        return self.indices


class Polynomial(_AbstractParametric):
    """``f(q) = Σ_k coefficients[k] x^k`` with ``x = q[index]`` (lowest order first).

    OpenSim's PolynomialFunction lists the highest order first: reverse it.

    **Arguments:**

    - `index`: the coordinate ``x = q[index]``.
    - `coefficients`: (k,) coefficients, lowest order first; ``coefficients[k]`` in
      joint units per (coordinate unit)^k.

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] for an empty or non-1-D array, or non-finite coefficients.
    """

    index: int = eqx.field(static=True)
    coefficients: Float[Array, " k"]

    def __init__(self, index: int, coefficients: RealLike):
        self.index = coordinate_index(index, "Polynomial")
        self.coefficients = real_numbers(coefficients, "Polynomial: coefficients")
        if self.coefficients.ndim != 1 or self.coefficients.shape[0] == 0:
            raise ModelError("Polynomial joint function needs a non-empty 1-D coefficient array.")
        _check_finite(f"Polynomial of coordinate {self.index}", "give finite coefficients.",
                      coefficients=self.coefficients)

    def __call__(self, q):
        return jnp.polyval(self.coefficients[::-1], read_coordinate(q, self.index, "Polynomial"))

    def coordinate_indices(self):
        return (self.index,)


class Composed(_AbstractWrapper):
    """``f(q) = outer(inner(q))``: a univariate ``outer`` applied to another joint function.

    ``outer`` is itself a joint function of a one-element vector (index 0), e.g. a
    spline; this is how an OpenSim transform-axis function of a coupled
    (dependent) coordinate is expressed.

    **Arguments:**

    - `outer`: a univariate joint function of ``x[0]``, ``x = (inner(q),)``.
    - `inner`: any joint function of ``q``.
    """

    outer: AbstractJointFunction
    inner: AbstractJointFunction

    def __init__(self, outer: AbstractJointFunction, inner: AbstractJointFunction):
        reads = set(outer.coordinate_indices()) - {0}
        if reads:  # x has one element: JAX would clamp x[1] to x[0]
            raise ModelError(f"Composed: outer must be a function of x[0] alone (x = (inner(q),)), e.g. "
                             f"CubicSpline.fit(0, ...); it reads indices {sorted(reads)}.")
        self.outer = outer
        self.inner = inner

    def _wrapped(self):
        return (self.outer, self.inner)

    def __call__(self, q):
        return self.outer(jnp.reshape(self.inner(q), (1,)))


class Scaled(_AbstractWrapper):
    """``f(q) = scale * inner(q)`` (OpenSim's MultiplierFunction).

    **Arguments:**

    - `inner`: the joint function to scale.
    - `scale`: the finite factor (dimensionless, or a unit conversion).

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] if `scale` is not finite.
    """

    inner: AbstractJointFunction
    scale: Float[Array, ""]

    def __init__(self, inner: AbstractJointFunction, scale: RealLike):
        self.inner = inner
        self.scale = float_array(scale)
        _check_finite("Scaled joint function", "give a finite scale.", scale=self.scale)

    def _wrapped(self):
        return (self.inner,)

    def __call__(self, q):
        return self.scale * self.inner(q)


class JaxFunction(AbstractJointFunction):
    """Any user JAX callable ``fn(q, params) -> scalar``.

    ``params`` is a pytree of arrays (differentiable leaves); ``coordinates`` lists
    the coordinate indices ``fn`` reads (used only to validate the model).
    Example, a shoulder rhythm of two coordinates:

    ```python
    JaxFunction(lambda q, p: p[0] * q[0] + p[1] * q[0] * q[1], jnp.array([0.4, 0.1]), (0, 1))
    ```

    Its gradient and Hessian come from JAX autodiff, so ``fn`` must be twice
    differentiable.

    **Arguments:**

    - `fn`: ``fn(q, params) -> scalar``, q (nq,) in rad or m, returning the joint
      variable (rad or m).
    - `params`: a pytree of arrays (or None), passed to ``fn``.
    - `coordinates`: the coordinate indices ``fn`` reads.
    """

    fn: Callable[[Array, Any], Array] = eqx.field(static=True)
    params: Any
    coordinates: tuple[int, ...] = eqx.field(static=True)

    def __init__(self, fn: Callable[[Array, Any], Array], params: Any = None, coordinates: Sequence[int] = ()):
        self.fn = fn
        self.params = params
        self.coordinates = tuple(coordinate_index(c, "JaxFunction")
                                 for c in _sequence(coordinates, "JaxFunction", "coordinates"))

    def __call__(self, q):
        return jnp.asarray(self.fn(q, self.params)).reshape(())

    def coordinate_indices(self):
        return self.coordinates
