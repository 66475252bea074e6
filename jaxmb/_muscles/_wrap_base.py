"""What every wrap object shares: its frame, OpenSim's quadrant, the PathWrap's range
and method, the WrapAction codes, and the interface the path code calls.

A wrap kind (sphere, cylinder, ellipsoid, torus) is a final subclass of
`AbstractWrapObject` that provides its parameters as one array
(`AbstractWrapObject.wrap_parameters`) and its algorithm
(`AbstractWrapObject.algorithm`): a jitted function
``wrap(p1, p2, params, axis, sign, skip) -> (code, r1, r2, length)`` in the wrap
frame. The path code groups wraps by algorithm, so that every wrap of one kind at
one slot of the muscles' PathWrapSets is computed by one vmapped call.
"""

import abc
import dataclasses
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero
from jaxtyping import Array, Float

from .._errors import ModelError
from .._safe import unit
from .._spatial import body_fixed_xyz
from ._checks import vector3

# OpenSim's WrapAction codes.
INSIDE_RADIUS, NO_WRAP, WRAPPED, MANDATORY_WRAP = -1, 0, 1, 2
ROUNDOFF = 2e-13  # OpenSim's EQUAL_WITHIN_ERROR
# OpenSim's PathWrap methods (how the ellipsoid picks its wrapping plane).
WRAP_METHODS = {"hybrid": 0, "midpoint": 1, "axial": 2}

_QUADRANTS = {"-x": (0, -1), "x": (0, 1), "+x": (0, 1), "-y": (1, -1), "y": (1, 1), "+y": (1, 1),
              "-z": (2, -1), "z": (2, 1), "+z": (2, 1), "all": (0, 0), "unassigned": (0, 0)}


def _quadrant(q: str, name: str):
    key = q.strip().lower()
    if key not in _QUADRANTS:
        raise ModelError(f"Wrap object {name!r}: quadrant {q!r} is not one of x, -x, y, -y, z, -z, all.")
    return _QUADRANTS[key]


@dataclasses.dataclass(frozen=True)
class WrapAlgorithm:
    """A wrap algorithm as the path code calls it (hashable: it keys the wrap groups).

    `wrap(p1, p2, params, axis, sign, skip=False)` returns ``(code, r1, r2, length)``
    for the segment p1-p2 in the wrap frame (`skip`: the caller will not use the
    result, so iterations that only refine it may stop). It is one `jax.jit` per
    algorithm, so that the forward resolution, the reverse sweep's `jax.vjp` and every
    slot of the same kind reuse one traced program. `code(p1, p2, params)`, where not
    None, returns the WrapAction alone, for kinds that only ever return
    MANDATORY_WRAP or NO_WRAP: the path code then picks the segment from it and runs
    the full (costly) wrap once. `unrefined`, where not None: the same wrap without the
    iterations that only refine its tangent points (OpenSim's multi-wrap sliding), whose
    WrapAction is always this one's: the path code takes every segment's WrapAction from
    it and runs this wrap just on the segments its choice reads.
    """

    wrap: Callable
    code: Callable | None = None
    unrefined: "WrapAlgorithm | None" = None
    # Whether `wrap` runs loops whose trip count depends on the segment (OpenSim's stopped
    # iterations), so that a batch costs its slowest lanes (`_paths.paths_iterate`).
    iterates: bool = False
    # Whether a pass runs `wrap` on the lanes of the muscles still live only, gathered in
    # chunks (`_paths._scanned_pass`): for algorithms whose lane is costly (the ellipsoid's
    # 300-point closest-point fan), so that done muscles cost nothing.
    gathers_live: bool = False
    # `far_side(p1, p2, params, axis, sign) -> bool`, where not None: whether `wrap` of that
    # segment takes the surface path the long way round (OpenSim's ellipsoid far-side rule),
    # a discrete state whose switch makes the length jump (`jaxmb.path_events`).
    far_side: Callable | None = None
    # `tangency(p1, p2, r1, r2, params) -> residual`, where not None: how far the tangent
    # points r1, r2 that `wrap` returned for p1-p2 are from solving the equations they
    # solve (on the surface, the path's straight lines tangent there), dimensionless
    # (`quadric_tangency`); large where an iteration stopped at its cap or went astray
    # (`jaxmb.path_status`).
    tangency: Callable | None = None

    @property
    def refines(self) -> bool:
        return self.unrefined is not None


class AbstractWrapObject(eqx.Module):
    """Common fields: the body, the pose of the wrap frame in it, OpenSim's quadrant
    (which side the path may wrap), and the PathWrap's point range and method.

    **Arguments** (of every final wrap class, besides its own sizes):

    - `name`: the wrap object's name.
    - `body`: the body it is fixed on.
    - `translation`: (3,) the wrap frame's origin in the body frame, m.
    - `xyz_body_rotation`: (3,) the wrap frame's body-fixed X-Y-Z rotation, rad.
    - `quadrant`: OpenSim's quadrant (``"all"``, ``"+x"``, ``"-y"``, ...).
    - `range`: OpenSim's 1-based (start, end) path-point indices; ``-1`` means the
      first (last) point.
    - `method`: the PathWrap method (``"hybrid"``, ``"midpoint"``, ``"axial"``).
    """

    name: eqx.AbstractVar[str]
    body: eqx.AbstractVar[str]
    translation: eqx.AbstractVar[Array]
    xyz_body_rotation: eqx.AbstractVar[Array]
    quadrant: eqx.AbstractVar[str]
    range: eqx.AbstractVar[tuple]
    method: eqx.AbstractVar[str]

    @abc.abstractmethod
    def wrap_parameters(self, dtype) -> Float[Array, " n"]:
        """The kind's parameters as one vector in `dtype` (the `params` of its algorithm)."""

    @abc.abstractmethod
    def turn_radius(self, dtype) -> Float[Array, ""]:
        """The largest radius (m) a path turns about on this object (`jaxmb.path_status`
        bounds the length a wrap may add by two turns and two diameters about it)."""

    @abc.abstractmethod
    def algorithm(self, n_wraps: int) -> WrapAlgorithm:
        """The algorithm that wraps this object on a muscle with `n_wraps` PathWraps
        (OpenSim's cylinder and torus slide their tangent points when a muscle has several)."""

    @property
    def wrap_axis(self) -> int:
        return _quadrant(self.quadrant, self.name)[0]

    @property
    def wrap_sign(self) -> int:
        return _quadrant(self.quadrant, self.name)[1]

    def pose(self, dtype):
        """(rotation, translation) of the wrap frame in the body frame."""
        return body_fixed_xyz(self.xyz_body_rotation.astype(dtype)), self.translation.astype(dtype)

    def wrap_line(self, p1: Float[Array, "3"], p2: Float[Array, "3"]):
        """Wrap the segment p1-p2 (wrap-frame coordinates, m), as on a muscle with one PathWrap.

        Returns ``(code, r1, r2, wrap_length)`` with OpenSim's codes
        (-1 inside, 0 no wrap, 1 wrapped, 2 mandatory wrap), tangent points in
        the wrap frame and the length of the path on the surface.
        """
        return self.algorithm(1).wrap(p1, p2, self.wrap_parameters(p1.dtype), self.wrap_axis, self.wrap_sign)


def init_common(self, name, body, translation, xyz_body_rotation, quadrant, range, method):
    """Set (and check) the fields of `AbstractWrapObject` on a final wrap class."""
    self.name = str(name)
    self.body = str(body)
    self.translation = vector3(translation, f"wrap object {name!r} translation")
    self.xyz_body_rotation = vector3(xyz_body_rotation, f"wrap object {name!r} xyz_body_rotation")
    _quadrant(quadrant, name)
    self.quadrant = str(quadrant)
    self.range = (int(range[0]), int(range[1]))
    start, end = self.range
    if any(i < 1 and i != -1 for i in self.range) or (start >= 1 and end >= 1 and start > end):
        # A reversed range selected no segment: the wrap never engaged, silently.
        raise ModelError(f"Wrap object {name!r}: range {tuple(range)} must be OpenSim's 1-based (start, end) path "
                         "points with start <= end (-1 for the first or the last point).")
    if str(method).strip().lower() not in WRAP_METHODS:
        raise ModelError(f"Wrap object {name!r}: method {method!r} is not one of {', '.join(WRAP_METHODS)}.")
    self.method = str(method)


def quadric_tangency(p1, p2, r1, r2, inv_a2):
    """The residuals of the tangency equations of a wrap on the quadric ``Σ r_i² / a_i² = 1``
    (`inv_a2` = 1/a_i², 0 along a cylinder's axis): each tangent point on the surface,
    ``Σ r_i² / a_i² - 1 = 0``, and the straight line from its path end tangent there,
    ``2 Σ r_i (p_i - r_i) / a_i² = 0`` (the surface normal ⟂ p - r). These are the
    equations OpenSim's ellipsoid Gauss-Newton drives to a squared sum of 1e-8, so each is
    then below 1e-4; the largest of the four, dimensionless (invariant under scaling)."""
    def ends(p, r):
        return jnp.maximum(jnp.abs(jnp.sum(r * r * inv_a2) - 1.0), jnp.abs(2.0 * jnp.sum(r * (p - r) * inv_a2)))
    return jnp.maximum(ends(p1, r1), ends(p2, r2))


def pick_shortest(r1a, r1b, r2a, r2b, c1, c2):
    """OpenSim's choice of the tangent pair with the largest dot product of the radii."""
    u1a, u1b, u2a, u2b = unit(r1a - c1), unit(r1b - c1), unit(r2a - c2), unit(r2b - c2)
    j1, j2, j3, j4 = u1a @ u2a, u1a @ u2b, u1b @ u2a, u1b @ u2b
    c_1 = (j1 > j2) & (j1 > j3) & (j1 > j4)
    c_2 = (~c_1) & (j2 > j3) & (j2 > j4)
    c_3 = (~c_1) & (~c_2) & (j3 > j4)
    r1 = jnp.where(c_1 | c_2, r1a, r1b)
    r2 = jnp.where(c_1 | c_3, r2a, jnp.where(c_2, r2b, jnp.where(c_3, r2a, r2b)))
    other1 = jnp.where(c_1 | c_2, r1b, r1a)
    other2 = jnp.where(c_1, r2b, jnp.where(c_2, r2a, jnp.where(c_3, r2b, r2a)))
    return r1, r2, other1, other2


def iterate_derivative(fn=None, *, n_in=1):
    """``fn(x_1, ..., x_n_in, *aux)`` (x_i: flat float arrays; aux: flags, not
    differentiated) differentiated as the iterations it actually makes, not as the
    point they converge to.

    OpenSim stops several wrap iterations at loose tolerances (the ellipsoid's
    Gauss-Newton at a squared residual of 1e-8, the torus's Levenberg-Marquardt at
    1e-4, the cylinder's restarts at 0.1 degree), so its lengths are functions of
    those iterates and -dL/dq is their derivative. The JVP rule forms the Jacobian
    ``d fn/dx_i`` by forward mode through fn's loops, from primal values only, and applies
    it linearly: reverse mode (the closed-form moment arms' ``jax.vjp``, ``jax.grad``)
    then transposes a matrix product instead of needing a reverse-differentiable
    loop of fixed length. Only the inputs whose tangent is not a symbolic zero are
    differentiated (a wrap's sizes, constant along q, cost no forward-mode direction
    when passed as an input of their own)."""
    if fn is None:
        return lambda f: iterate_derivative(f, n_in=n_in)
    wrapped = jax.custom_jvp(fn)

    def _jvp(primals, tangents):
        xs, aux = primals[:n_in], primals[n_in:]
        live = [i for i in range(n_in) if not isinstance(tangents[i], SymbolicZero)]
        if not live:
            out = fn(*xs, *aux)
            return out, jnp.zeros_like(out)

        def with_value(*values):
            full = list(xs)
            for i, v in zip(live, values):
                full[i] = v
            y = fn(*full, *aux)
            return y, y

        jacs, out = jax.jacfwd(with_value, argnums=tuple(range(len(live))), has_aux=True)(*(xs[i] for i in live))
        return out, sum(j @ tangents[i] for j, i in zip(jacs, live))

    wrapped.defjvp(_jvp, symbolic_zeros=True)
    return wrapped
