"""Muscle paths given as functions of the coordinates instead of geometry: OpenSim's
``FunctionBasedPath`` with a ``MultivariatePolynomialFunction`` length (the form OpenSim's
``PolynomialPathFitter`` writes; Moco's route to fast muscle paths).

The path length is a polynomial of the OpenSim coordinates the path names,
``L(q) = P(c(q))`` with ``c_j(q)`` each coordinate as a joint function of the
independent coordinates, and the moment arms follow in closed form,
``R = -dL/dq = -J_c(q)ᵀ ∇P(c)`` (Ehsani 2016, Eq. 195, through the chain rule). The
function-based paths of a model are evaluated together, grouped by their polynomials'
dimension and order, each group one structure of arrays (one coefficient row per
muscle), so that the program grows with the number of groups, not of muscles.
"""

import functools
import itertools
import math
from collections.abc import Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import finite, float_array, is_count
from .._errors import ModelError
from .._functions import AbstractJointFunction
from .._typing import RealLike


def polynomial_exponents(dimension: int, order: int) -> np.ndarray:
    """The monomials of a [`jaxmb.MultivariatePolynomial`][jaxmb.MultivariatePolynomial], in
    OpenSim's order of coefficients: the exponent tuples ascending lexicographically, so
    that the last argument's power varies fastest ((0, 0), (0, 1), (0, 2), (1, 0), (1, 1),
    (2, 0) for two arguments of order 2).

    **Arguments:**

    - `dimension`: the number of arguments d.
    - `order`: the largest total degree n.

    **Returns:** `(C(d + n, n), d)` integer exponents, one row per monomial.
    """
    if not (is_count(dimension, 1) and is_count(order, 0)):  # an order of -1 gave no monomials
        raise ValueError(f"polynomial_exponents: dimension must be an integer >= 1 and order an integer >= 0, "
                         f"got {dimension!r} and {order!r}.")
    rows = [e for e in itertools.product(range(order + 1), repeat=dimension) if sum(e) <= order]
    return np.array(rows, dtype=int).reshape(len(rows), dimension)


class MultivariatePolynomial(eqx.Module):
    """OpenSim's ``MultivariatePolynomialFunction``: ``P(x) = Σ_k a_k Π_j x_j^{e_kj}`` over
    the ``C(d + n, n)`` monomials of total degree at most `order` n in `dimension` d
    arguments.

    **Arguments:**

    - `coefficients`: the ``C(d + n, n)`` coefficients ``a_k``, in OpenSim's order
      ([`jaxmb.polynomial_exponents`][jaxmb.polynomial_exponents]: ascending powers,
      the last argument's fastest).
    - `dimension`: the number of arguments d (at least 1).
    - `order`: the largest total degree n (at least 0).

    **Raises:** [`jaxmb.ModelError`][jaxmb.ModelError] for a coefficient count that does not
    match the dimension and order, or a coefficient that is not finite.
    """

    coefficients: Float[Array, " n"]
    dimension: int = eqx.field(static=True)
    order: int = eqx.field(static=True)

    def __init__(self, coefficients: RealLike, dimension: int, order: int):
        if not (is_count(dimension, 1) and is_count(order, 0)):  # int() would cut 1.5 to 1
            raise ModelError(f"MultivariatePolynomial: dimension must be an integer >= 1 and order an integer >= 0, "
                             f"got dimension {dimension!r} and order {order!r}.")
        self.dimension, self.order = int(dimension), int(order)
        coefficients = float_array(coefficients)
        if coefficients.ndim != 1:  # a table was flattened in whatever order it had
            raise ModelError(f"MultivariatePolynomial: coefficients must be a 1-D array in OpenSim's order, got "
                             f"shape {coefficients.shape}.")
        self.coefficients = finite(coefficients, "MultivariatePolynomial: coefficients")
        n = math.comb(self.dimension + self.order, self.order)
        if self.coefficients.shape != (n,):
            raise ModelError(f"MultivariatePolynomial: {self.dimension} arguments of order {self.order} need "
                             f"C({self.dimension} + {self.order}, {self.order}) = {n} coefficients, got "
                             f"{self.coefficients.size}.")

    def __call__(self, x: Float[Array, " d"]) -> Float[Array, ""]:
        """``P(x)`` at the arguments `x` (d,)."""
        _arguments(self, x)
        return polynomial_values(self.coefficients[None], self.dimension, self.order, jnp.asarray(x)[None])[0]

    def gradient(self, x: Float[Array, " d"]) -> Float[Array, " d"]:
        """``∇P(x)`` (d,), in closed form."""
        _arguments(self, x)
        return polynomial_values(self.coefficients[None], self.dimension, self.order, jnp.asarray(x)[None],
                                 gradient=True)[1][0]


def _arguments(p: MultivariatePolynomial, x) -> None:
    """`x` must hold the polynomial's d arguments (its extra entries were ignored)."""
    if jnp.shape(x) != (p.dimension,):
        raise ModelError(f"MultivariatePolynomial: x must hold its {p.dimension} arguments, shape ({p.dimension},), "
                         f"got shape {jnp.shape(x)}.")


@functools.lru_cache(maxsize=64)
def monomial_tables(dimension: int, order: int):
    """Static tables of the monomials of `polynomial_exponents(dimension, order)`: the
    exponents (N, d), and per monomial and argument the index of the monomial with that
    exponent lowered by one (``e - 1_j``; 0 where ``e_j = 0``: its weight ``e_j`` is 0)."""
    e = polynomial_exponents(dimension, order)
    index = {tuple(row): n for n, row in enumerate(e)}
    lower = np.zeros(e.shape, int)
    for n, row in enumerate(e):
        for j in np.flatnonzero(row):
            lower[n, j] = index[tuple(row - np.eye(dimension, dtype=int)[j])]
    return e, lower


def monomials(x, dimension: int, order: int):
    """The monomials ``Π_j x_j ** e_nj`` (G, N) of `polynomial_exponents(dimension, order)` at
    G points `x` (G, d), as repeated products (exact for the small orders of fitted paths)."""
    e, _ = monomial_tables(dimension, order)
    powers = jnp.cumprod(jnp.concatenate([jnp.ones_like(x)[..., None], jnp.repeat(x[..., None], order, -1)], -1), -1)
    return jnp.prod(powers[:, np.arange(dimension), e], -1)


def polynomial_values(coefficients, dimension: int, order: int, x, gradient: bool = False):
    """Values ``P_g(x_g)`` (G,) of G polynomials of one `dimension` and `order` at once, and
    with `gradient` also their gradients (G, d): `coefficients` (G, N), `x` (G, d).

    ``∂(x^e)/∂x_j = e_j x^(e - 1_j)``, a monomial of the same table: the gradient is one
    gather of the monomials, no product per argument."""
    e, lower = monomial_tables(dimension, order)
    terms = monomials(x, dimension, order)
    values = jnp.sum(coefficients * terms, -1)
    if not gradient:
        return values
    weights = coefficients[:, :, None] * e.astype(np.dtype(x.dtype))[None]  # (G, N, d): a_n e_nj
    return values, jnp.einsum("gnj,gnj->gj", weights, terms[:, lower])


class FunctionBasedPath(eqx.Module):
    """A muscle path whose length is a function of coordinates (OpenSim's ``FunctionBasedPath``):
    ``L(q) = P(c_1(q), ..., c_d(q))``.

    **Arguments:**

    - `coordinates`: the d OpenSim coordinates the function reads, each as a joint
      function of the independent coordinates (an independent coordinate is
      `jaxmb.Coordinate`; the OpenSim importer gives a coupled one its coupling function).
    - `length_function`: the [`jaxmb.MultivariatePolynomial`][jaxmb.MultivariatePolynomial]
      ``P`` (m), with d arguments.

    The moment arms are ``R = -dL/dq`` in closed form, and the lengthening speed
    ``dL/dt = -Rᵀ q'``; OpenSim computes both from the length function too when the path
    gives no moment-arm or speed functions (as ``PolynomialPathFitter``'s paths do).

    **Raises:** [`jaxmb.ModelError`][jaxmb.ModelError] for a coordinate that is not a joint
    function, or a function whose number of arguments is not the number of coordinates.
    """

    coordinates: tuple[AbstractJointFunction, ...]
    length_function: MultivariatePolynomial

    def __init__(self, coordinates: Sequence, length_function: MultivariatePolynomial):
        self.coordinates = tuple(coordinates)
        if not all(isinstance(c, AbstractJointFunction) for c in self.coordinates):
            raise ModelError("FunctionBasedPath: coordinates must be joint functions of q (e.g. jaxmb.Coordinate).")
        if not isinstance(length_function, MultivariatePolynomial):
            raise ModelError(f"FunctionBasedPath: length_function must be a jaxmb.MultivariatePolynomial, got "
                             f"{type(length_function).__name__}.")
        if length_function.dimension != len(self.coordinates):
            raise ModelError(f"FunctionBasedPath: the length function has {length_function.dimension} arguments but "
                             f"the path names {len(self.coordinates)} coordinates; give one coordinate per argument.")
        self.length_function = length_function

    def coordinate_indices(self) -> tuple[int, ...]:
        """The independent coordinates the length can depend on."""
        return tuple(sorted({i for c in self.coordinates for i in c.coordinate_indices()}))


def function_path_lengths(paths: Sequence[FunctionBasedPath], q, gradient: bool = False):
    """Lengths (K,) of the function-based `paths` at `q`, and with `gradient` also ``dL/dq``
    (K, nq): the paths grouped by their polynomials' dimension and order, each group one
    structure of arrays (the program grows with the number of groups, not of muscles)."""
    groups: dict = {}
    for k, p in enumerate(paths):
        groups.setdefault((p.length_function.dimension, p.length_function.order), []).append(k)
    dt, values, slopes, order = q.dtype, [], [], []
    for (dimension, degree), ks in groups.items():
        coefficients = jnp.stack([paths[k].length_function.coefficients.astype(dt) for k in ks])
        x = jnp.stack([jnp.stack([c(q).astype(dt) for c in paths[k].coordinates]) for k in ks])
        out = polynomial_values(coefficients, dimension, degree, x, gradient)
        if gradient:
            jac = jnp.stack([jnp.stack([c.gradient(q).astype(dt) for c in paths[k].coordinates]) for k in ks])
            out, slope = out[0], jnp.einsum("gj,gjq->gq", out[1], jac)  # chain rule through c(q)
            slopes.append(slope)
        values.append(out)
        order.extend(ks)
    back = np.argsort(order)
    values = jnp.concatenate(values)[back]
    return (values, jnp.concatenate(slopes)[back]) if gradient else values
