"""The joint-function base class and the helpers every joint function shares.

Ehsani (2016), section 3-1: every joint variable ``f_i`` (angle of a revolute joint,
displacement of a prismatic one) is a smooth function of the minimal generalized
coordinates ``q``; kinematics and dynamics need its value, gradient ``∇f_i``
(nq,) and Hessian ``H_i`` (nq, nq). Every joint function is an equinox pytree whose
numeric parameters are array leaves (so ``jax.grad`` with respect to spline
coefficients or Fourier amplitudes works) and whose coordinate indices are static.
"""

import abc
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Scalar

from .._checks import is_count
from .._errors import ModelError


def coordinate_index(value, owner: str) -> int:
    """`value` as a coordinate's index in ``q``: an integer >= 0, else a ModelError naming
    `owner`. ``int()`` would cut 1.9 to 1, and a float or a name fails only at the first
    evaluation (a negative index would read from the end of ``q``)."""
    if not is_count(value, 0):
        raise ModelError(f"{owner}: a coordinate index must be an integer >= 0 (the coordinate's position in q, as "
                         f"ModelBuilder.add_coordinate returns it), got {value!r}.")
    return int(value)


def read_coordinate(q, index: int, owner: str):
    """``q[index]``, refused (at trace time: shapes are static) where `q` is not a vector
    holding that index: a joint function called on its own with a scalar, or with a short
    ``q`` (JAX would clamp the index and read another coordinate)."""
    shape = jnp.shape(q)
    if len(shape) != 1 or index >= shape[0]:
        raise ModelError(f"{owner}: reads q[{index}], but q has shape {shape}; pass the model's coordinates q "
                         "(nq,).")
    return q[index]


def _is_traced(x) -> bool:
    return isinstance(x, jax.core.Tracer)


def _check_finite(owner: str, fix: str, **arrays) -> None:
    """Raise [`jaxmb.ModelError`][jaxmb.ModelError] if a concrete array in `arrays` holds NaN or inf.

    `owner` names the function (``"CubicSpline.fit of coordinate 2"``), `fix` says
    what to do. Traced arrays (inside ``jit``/``vmap``/``grad``) cannot be inspected
    at construction and are skipped; the same data built outside a transform are
    checked.
    """
    for name, value in arrays.items():
        if value is None or _is_traced(value):
            continue
        a = np.asarray(value)
        if not np.issubdtype(a.dtype, np.number):
            continue
        bad = ~np.isfinite(a)
        if np.any(bad):
            where = np.argwhere(bad)[0]
            at = f" at index {tuple(int(i) for i in where)}" if a.ndim > 1 else (
                f" at index {int(where[0])}" if a.ndim else "")
            raise ModelError(
                f"{owner}: {name} holds {int(bad.sum())} non-finite value(s) (first: "
                f"{a[tuple(where)]}{at}); {fix}")


class AbstractJointFunction(eqx.Module):
    """A scalar function ``f(q)`` of the generalized-coordinate vector ``q`` (nq,).

    Subclasses implement `__call__` and `coordinate_indices`;
    `gradient` and `hessian` default to autodiff, and a family with
    closed forms (the univariate functions) provides them instead.

    A model evaluates joint functions of the same kind and shape together
    (``jax.vmap`` over their stacked parameters) where `vectorisable` says so.
    """

    def vectorisable(self) -> bool:
        """Whether several functions of this kind and shape may be evaluated as one
        batched function (the parameters stacked; the static fields equal). False by
        default: it is right for pure parametric functions, not for functions with
        per-trace caches (loop closures) or trivial ones (coordinates, constants)."""
        return False

    @abc.abstractmethod
    def __call__(self, q: Float[Array, " nq"]) -> Scalar:
        """Value ``f(q)``."""

    @abc.abstractmethod
    def coordinate_indices(self) -> tuple[int, ...]:
        """Indices of the coordinates this function depends on. A model checks them
        against its coordinates, and the dynamics of small models skip the derivatives
        with respect to the others (zero by this contract), so list every coordinate
        the function reads."""

    def gradient(self, q: Float[Array, " nq"]) -> Float[Array, " nq"]:
        """``∇f(q)``, shape (nq,)."""
        return jax.grad(self.__call__)(q)

    def hessian(self, q: Float[Array, " nq"]) -> Float[Array, "nq nq"]:
        """``H(q) = ∂²f/∂q²``, shape (nq, nq)."""
        return jax.hessian(self.__call__)(q)

    def rates(self, q: Float[Array, " nq"], qd: Float[Array, " nq"]) -> tuple[Scalar, Scalar, Scalar]:
        """``(f, f' = ∇f·q', q'ᵀ H q')`` along a motion (the velocity product of
        Ehsani 2016, Eq. 57), by nested forward-mode derivatives (no Hessian is formed)."""
        inner = lambda x: jax.jvp(self.__call__, (x,), (qd,))  # noqa: E731
        (f, fd), (_, fdd) = jax.jvp(inner, (q,), (qd,))
        return f, fd, fdd

    def rates_and_gradient(self, q: Float[Array, " nq"], qd: Float[Array, " nq"]
                           ) -> tuple[Scalar, Scalar, Scalar, Float[Array, " nq"]]:
        """``(*rates(q, q'), ∇f(q))``: what a right-hand side of the dynamics needs.
        Functions whose rates already hold ``∇f`` (closed-form functions, loop
        closures) return it from the same evaluation instead of a second one."""
        return (*self.rates(q, qd), self.gradient(q))

    @classmethod
    def _evaluate_alike(cls, stacked: "AbstractJointFunction", method: str, *args) -> Any:
        """``method(*args)`` of several `vectorisable` functions of this kind at
        once: `stacked` holds their parameters stacked along a leading axis (their
        static fields are equal), and so does every output. By default ``jax.vmap``
        over the stack; a family whose functions share work provides its own."""
        return jax.vmap(lambda fn: getattr(fn, method)(*args))(stacked)


def _univariate_rates(derivatives, q, qd, index):
    """``(f, f', q'ᵀ H q', ∇f)`` of a function of ``x = q[index]`` alone from
    ``(f, df/dx, d²f/dx²)``."""
    value, d1, d2 = derivatives
    xd = qd[index]
    return value, d1 * xd, d2 * xd * xd, jnp.zeros_like(q).at[index].set(d1)


def _univariate_outputs(method: str, derivatives, index: int, q, qd=None):
    """What `method` of a function of ``x = q[index]`` alone returns, from
    ``(f, df/dx, d²f/dx²)`` at that x."""
    value, d1, d2 = derivatives
    if method == "__call__":
        return value
    if method == "gradient":
        return jnp.zeros_like(q).at[index].set(d1)
    if method == "hessian":
        return jnp.zeros((q.shape[0],) * 2, dtype=q.dtype).at[index, index].set(d2)
    rates = _univariate_rates(derivatives, q, qd, index)
    return rates[:3] if method == "rates" else rates


class _AbstractUnivariateFunction(AbstractJointFunction):
    """A function of one coordinate, ``f(q) = s(q[index])``, whose concrete class gives
    ``_derivatives(x) = (s, s', s'')`` in closed form; every method follows from one
    call. Functions of one kind, coordinate and static fields share that call when
    stacked (`_evaluate_alike`): ``_derivatives`` must then accept parameters
    with a leading stack axis and return (m,) outputs. For Fourier series that shares
    the harmonics between the series instead of computing them once per series."""

    index: eqx.AbstractVar[int]

    @abc.abstractmethod
    def _derivatives(self, xq) -> tuple[Array, Array, Array]:
        """``(s, ds/dx, d²s/dx²)`` at the scalar ``x = xq``."""

    def coordinate_indices(self):
        return (self.index,)

    def vectorisable(self):
        return True

    def _evaluate(self, method, q, qd=None):
        x = read_coordinate(q, self.index, type(self).__name__)
        return _univariate_outputs(method, self._derivatives(x), self.index, q, qd)

    def __call__(self, q):
        return self._evaluate("__call__", q)

    def gradient(self, q):
        """Closed form ``s'(x) e_index``."""
        return self._evaluate("gradient", q)

    def hessian(self, q):
        """Closed form ``s''(x) e_index e_indexᵀ``."""
        return self._evaluate("hessian", q)

    def rates(self, q, qd):
        return self._evaluate("rates", q, qd)

    def rates_and_gradient(self, q, qd):
        return self._evaluate("rates_and_gradient", q, qd)

    @classmethod
    def _evaluate_alike(cls, stacked, method, *args):
        q = args[0]
        derivatives = stacked._derivatives(q[stacked.index])
        return jax.vmap(lambda d: _univariate_outputs(method, d, stacked.index, *args))(derivatives)
