"""OpenSim's WrapSphere: a sphere the path wraps where the straight segment crosses it."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._safe import acos, dsign, norm, safe_div, sqrt0, unit
from ._checks import positive, scalar
from ._wrap_base import (INSIDE_RADIUS, MANDATORY_WRAP, NO_WRAP, WRAPPED, AbstractWrapObject, WrapAlgorithm,
                         init_common, pick_shortest, quadric_tangency)


def _sphere_tangents(p, n, radius):
    """The two tangent points from p to the circle of `radius` in the plane normal to n."""
    d = norm(p)
    y = unit(-p)
    z = jnp.cross(n, y)
    ratio = radius / jnp.where(d > 0, d, 1.0)
    # arcsin' is infinite at 1 (p on or inside the sphere: INSIDE_RADIUS, never
    # selected, but a 0 * inf cotangent would poison reverse-mode gradients).
    out = ~(ratio < 1.0)
    a = jnp.where(out, 0.5 * jnp.pi, jnp.arcsin(jnp.where(out, 0.5, ratio)))
    reach = d * jnp.cos(a)
    ta = p + reach * (jnp.cos(a) * y + jnp.sin(a) * z)
    tb = p + reach * (jnp.cos(a) * y - jnp.sin(a) * z)
    return ta, tb


def _sphere_wrap(p1, p2, radius, axis, sign):
    """OpenSim's WrapSphere; `axis` (0-2) and `sign` (-1, 0 = all, +1) may be traced."""
    d1, d2 = norm(p1), norm(p2)
    inside = (d1 < radius) | (d2 < radius)
    ri = p1 - p2
    mp = -p2
    a = ri @ ri
    b = -2.0 * (mp @ ri)
    c = mp @ mp - radius * radius
    disc = b * b - 4.0 * a * c
    sq = sqrt0(disc)
    l1 = safe_div(-b + sq, 2.0 * a)
    l2 = safe_div(-b - sq, 2.0 * a)
    hit = (disc >= 0.0) & (l1 > 0.0) & (l1 < 1.0) & (l2 > 0.0) & (l2 < 1.0) & (l1 >= l2)
    p1p2 = unit(p1 - p2)
    n = unit(jnp.cross(p1p2, unit(p2)))
    r1a, r1b = _sphere_tangents(p1, n, radius)
    r2a, r2b = _sphere_tangents(p2, n, radius)
    zero = jnp.zeros(3, p1.dtype)
    r1, r2, o1, o2 = pick_shortest(r1a, r1b, r2a, r2b, zero, zero)
    code = jnp.where(hit, WRAPPED, NO_WRAP)
    # Quadrant-constrained wrap (computed always, selected where sign != 0).
    quad = jnp.asarray(sign) != 0
    s1, s2 = dsign(p1[axis]), dsign(p2[axis])
    either = (s1 == sign) | (s2 == sign)
    tt = -(((-p1) @ p1p2))
    mm = p1 + (-(p1 @ p1p2)) * p1p2
    mand = (mm @ mm < radius * radius) & (tt > 0.0) & (tt < 1.0)
    weak = (s1 != s2) & (dsign(mm[axis]) != sign)
    code_q = jnp.where(either, jnp.where(mand, MANDATORY_WRAP, jnp.where(weak, WRAPPED, NO_WRAP)), code)
    code_q = jnp.where(hit, code_q, NO_WRAP)
    code = jnp.where(quad, code_q, code)
    need = quad & ((s1 != sign) | (s2 != sign))
    wrapaxis = jnp.zeros(3, p1.dtype).at[axis].set(jnp.asarray(sign, p1.dtype))
    summ = unit(-p1 - p2)
    c1a = unit(r1a) @ summ > unit(r1b) @ summ
    c2a = unit(r2a) @ summ > unit(r2b) @ summ
    q1, q1o = jnp.where(c1a, r1a, r1b), jnp.where(c1a, r1b, r1a)
    q2, q2o = jnp.where(c2a, r2a, r2b), jnp.where(c2a, r2b, r2a)
    flip = unit((q1 - p1) + (q2 - p2)) @ wrapaxis < 0.0
    q1, q2 = jnp.where(flip, q1o, q1), jnp.where(flip, q2o, q2)
    sum_musc = (q1 - p1) + (q2 - p2)
    sum_r = q1 + q2
    far_q = sum_r @ sum_musc < 0.0
    r1, r2 = jnp.where(need, q1, r1), jnp.where(need, q2, r2)
    far = need & far_q
    code = jnp.where(inside, INSIDE_RADIUS, code)
    angle = acos(unit(r1) @ unit(r2))
    angle = jnp.where(far, -(2.0 * jnp.pi - angle), angle)  # OpenSim's sign, kept as is
    return code, r1, r2, radius * angle


# The same algorithm whatever the number of PathWraps (`skip`: nothing to refine).
_SPHERE = WrapAlgorithm(jax.jit(lambda p1, p2, prm, ax, sg, skip=False: _sphere_wrap(p1, p2, prm[0], ax, sg)),
                        tangency=lambda p1, p2, r1, r2, prm: quadric_tangency(p1, p2, r1, r2, jnp.full(3, prm[0] ** -2)))


class WrapSphere(AbstractWrapObject):
    """A sphere of `radius` (m) (OpenSim WrapSphere: wraps when the segment crosses it).

    **Arguments:**

    - `radius`: m, positive.
    - `name`, `body`, `translation`, `xyz_body_rotation`, `quadrant`, `range`, `method`:
      as for every wrap object (`AbstractWrapObject`).

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] for non-positive or non-finite sizes, an unknown quadrant or method.
    """

    name: str = eqx.field(static=True)
    body: str = eqx.field(static=True)
    translation: Float[Array, "3"]
    xyz_body_rotation: Float[Array, "3"]
    radius: Float[Array, ""]
    quadrant: str = eqx.field(static=True)
    range: tuple = eqx.field(static=True)
    method: str = eqx.field(static=True)

    def __init__(self, name, body, radius, translation=(0.0, 0.0, 0.0), xyz_body_rotation=(0.0, 0.0, 0.0),
                 quadrant="all", range=(-1, -1), method="hybrid"):
        init_common(self, name, body, translation, xyz_body_rotation, quadrant, range, method)
        self.radius = positive(scalar(radius, f"WrapSphere {name!r} radius"), f"WrapSphere {name!r} radius")

    def wrap_parameters(self, dtype):
        return jnp.stack([self.radius]).astype(dtype)

    def turn_radius(self, dtype):
        return jnp.asarray(self.radius, dtype)

    def algorithm(self, n_wraps):
        return _SPHERE
