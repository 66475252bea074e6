"""Rotations, homogeneous transforms and the matrix calculus of Ehsani 2016, section 2.

Conventions
-----------
* A homogeneous transform ``A4`` (4x4) maps coordinates in a child frame to its
  parent frame: ``[r_parent; 1] = A4 @ [r_child; 1]`` (Ehsani 2016, Eq. 38, 41).
* ``skew(v) @ w == cross(v, w)`` (Ehsani's overhead tilde).
* Ehsani's matrix derivative (Definition 1, Eq. 3) of ``A`` (m x n) with respect
  to ``q`` (r,) is the (m r) x n matrix whose (i, k) block of r rows is
  ``dA_ik/dq``. :func:`matrix_derivative` builds it from a JAX Jacobian.
"""

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float


def skew(v: Float[Array, "*batch 3"]) -> Float[Array, "*batch 3 3"]:
    """Skew-symmetric matrix ``ṽ`` with ``ṽ w = v × w`` (Ehsani's overhead tilde),
    batched over leading axes."""
    z = jnp.zeros_like(v[..., 0])
    return jnp.stack([jnp.stack([z, -v[..., 2], v[..., 1]], axis=-1),
                      jnp.stack([v[..., 2], z, -v[..., 0]], axis=-1),
                      jnp.stack([-v[..., 1], v[..., 0], z], axis=-1)], axis=-2)


def cross(a: Float[Array, "..."], b: Float[Array, "..."], axis: int = -1) -> Float[Array, "..."]:
    """``a × b`` over `axis` (the last by default), batched over the others (the one
    cross product of the spatial algebra; ``jnp.cross`` measured faster than
    written-out components inside the Newton-Euler pass)."""
    return jnp.cross(a, b, axis=axis)


def rotation_about_axis(axis: Float[Array, "3"], angle) -> Float[Array, "3 3"]:
    """Rotation by ``angle`` about the unit vector ``axis`` (Ehsani 2016, Eq. 39).

    ``A = I + ṽ sin θ + 2 ṽ² sin²(θ/2)``, Rodrigues' formula in Ehsani's form.
    """
    v = skew(axis)
    s = jnp.sin(angle)
    h = jnp.sin(0.5 * angle)
    return jnp.eye(3, dtype=v.dtype) + v * s + 2.0 * (v @ v) * (h * h)


def homogeneous(rotation: Float[Array, "3 3"], translation: Float[Array, "3"]):
    """The 4x4 transform ``[[R, p], [0, 1]]`` (Ehsani 2016, Eq. 38)."""
    top = jnp.concatenate([rotation, translation[:, None]], axis=1)
    bottom = jnp.zeros((1, 4), dtype=top.dtype).at[0, 3].set(1.0)
    return jnp.concatenate([top, bottom], axis=0)


def body_fixed_xyz(angles: Float[Array, "3"]) -> Float[Array, "3 3"]:
    """Rotation ``Rx(a0) Ry(a1) Rz(a2)`` (body-fixed X-Y-Z, OpenSim's frame orientation)."""
    ex = jnp.array([1.0, 0.0, 0.0], dtype=angles.dtype)
    ey = jnp.array([0.0, 1.0, 0.0], dtype=angles.dtype)
    ez = jnp.array([0.0, 0.0, 1.0], dtype=angles.dtype)
    return (
        rotation_about_axis(ex, angles[0])
        @ rotation_about_axis(ey, angles[1])
        @ rotation_about_axis(ez, angles[2])
    )


def vee(w: Float[Array, "3 3"]) -> Float[Array, "3"]:
    """Inverse of :func:`skew` (uses the antisymmetric part)."""
    return 0.5 * jnp.array([w[2, 1] - w[1, 2], w[0, 2] - w[2, 0], w[1, 0] - w[0, 1]])


# --------------------------------------------------------------------------
# Ehsani (2016), section 2: matrix calculus with Kronecker products.
# --------------------------------------------------------------------------


def commutation(m: int, n: int, dtype=float) -> Array:
    """Permutation matrix ``U_{m,n} = sum_ik E_ik^{m x n} ⊗ E_ki^{n x m}`` (Eq. 2).

    It satisfies the commutation rule ``U_{s,m}(A ⊗ B)U_{n,t} = B ⊗ A`` for
    A (m x n), B (s x t) (tested in tests/test_matrix_calculus.py). Built with
    NumPy: it is a constant of the model's size.
    """
    u = np.zeros((m * n, n * m))
    for i in range(m):
        for k in range(n):
            e_ik = np.zeros((m, n))
            e_ik[i, k] = 1.0
            u += np.kron(e_ik, e_ik.T)
    return jnp.asarray(u, dtype=dtype)


def matrix_derivative(jacobian: Float[Array, "m n r"]) -> Float[Array, "mr n"]:
    """Arrange a JAX Jacobian ``dA[i,k]/dq[j]`` as Ehsani's ``∂A/∂q`` (Definition 1).

    ``jacobian`` has shape ``(m, n, r)`` (as returned by ``jax.jacfwd(A)(q)``);
    the result has shape ``(m r, n)`` with ``out[i r + j, k] = dA_ik/dq_j``.
    """
    m, n, r = jacobian.shape
    return jnp.transpose(jacobian, (0, 2, 1)).reshape(m * r, n)


def vec(a: Array) -> Array:
    """Column stacking ``vec(A)`` (Neudecker): columns of ``A`` one below the other."""
    return a.T.reshape(-1)


# --------------------------------------------------------------------------
# Products of small matrices on the hot path.
# --------------------------------------------------------------------------


def small_matmul(a: Array, b: Array) -> Array:
    """``a @ b`` (batched over leading axes) with the contraction written out as
    a sum of broadcast products when it is at most 4 long.

    Why: on CPU a right-hand side of the dynamics is a few hundred flops spread
    over many tiny products, and XLA runs every ``dot`` as a separate kernel (as
    it does a reduction); written as elementwise products and sums the 3x3 and
    4x4 products fuse with their neighbours, so a tree pass is a handful of
    kernels instead of dozens. Same values up to the order of the additions.
    """
    n = a.shape[-1]
    if n > 4 or b.ndim < 2 or a.ndim < 2:
        return a @ b
    if a.ndim != b.ndim:  # batch dimensions broadcast explicitly (no implicit rank promotion)
        batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a, b = jnp.broadcast_to(a, batch + a.shape[-2:]), jnp.broadcast_to(b, batch + b.shape[-2:])
    out = a[..., :, 0:1] * b[..., 0:1, :]
    for k in range(1, n):
        out = out + a[..., :, k:k + 1] * b[..., k:k + 1, :]
    return out


def small_matvec(a: Array, v: Array) -> Array:
    """``a @ v`` for matrices a (..., m, n) and vectors v (..., n), n <= 4 written out
    (see :func:`small_matmul`)."""
    n = a.shape[-1]
    if n > 4:
        return jnp.einsum("...ij,...j->...i", a, v)
    if a.ndim != v.ndim + 1:  # batch dimensions broadcast explicitly (no implicit rank promotion)
        batch = jnp.broadcast_shapes(a.shape[:-2], v.shape[:-1])
        a, v = jnp.broadcast_to(a, batch + a.shape[-2:]), jnp.broadcast_to(v, batch + v.shape[-1:])
    out = a[..., :, 0] * v[..., None, 0]
    for k in range(1, n):
        out = out + a[..., :, k] * v[..., None, k]
    return out


def own_buffer(x: Array) -> Array:
    """`x` (2, n), unchanged in value, computed into a buffer of its own.

    Why: XLA on CPU fuses cheap elementwise producers into every consumer and
    evaluates them again for each element there; for sines and cosines (roughly ten
    times a product in float64) read by many elements that costs more than the
    rest of the consumer. A product with the 2x2 identity is a ``dot``, which XLA
    does not fuse, so its operand is computed once; ``lax.optimization_barrier``
    does not have that effect on XLA's CPU compiler (jax 0.10).
    """
    return jnp.eye(2, dtype=x.dtype) @ x


# --------------------------------------------------------------------------
# Spatial vectors (Featherstone), in body coordinates: motion vectors (ω, v) and
# force vectors (n, f), the angular part first; all batched over leading axes.
# --------------------------------------------------------------------------


def cross_motion(v: Float[Array, "..."], m: Float[Array, "..."], axis: int = -1) -> Float[Array, "..."]:
    """``v × m`` for motion vectors (components along `axis`, the last by default):
    ``(ω × ω_m, ω × v_m + v × ω_m)``."""
    (w, lin), (mw, mv) = jnp.split(v, 2, axis=axis), jnp.split(m, 2, axis=axis)
    return jnp.concatenate([cross(w, mw, axis), cross(w, mv, axis) + cross(lin, mw, axis)], axis=axis)


def cross_force(v: Float[Array, "..."], f: Float[Array, "..."], axis: int = -1) -> Float[Array, "..."]:
    """``v ×* f`` for a motion vector `v` and a force vector `f` (components along
    `axis`, the last by default): ``(ω × n + v × f, ω × f)``."""
    (w, lin), (fn, ff) = jnp.split(v, 2, axis=axis), jnp.split(f, 2, axis=axis)
    return jnp.concatenate([cross(w, fn, axis) + cross(lin, ff, axis), cross(w, ff, axis)], axis=axis)


def motion_transform(rotation: Float[Array, "*batch 3 3"], translation: Float[Array, "*batch 3"]
                     ) -> Float[Array, "*batch 6 6"]:
    """The motion-vector transform from parent to child coordinates for the child frame
    at ``(R, p)`` in the parent, ``X = [[Rᵀ, 0], [-Rᵀ p̃, Rᵀ]]``; its transpose carries
    force vectors from child to parent coordinates."""
    rt = jnp.swapaxes(rotation, -1, -2)
    zero = jnp.zeros_like(rt)
    top = jnp.concatenate([rt, zero], axis=-1)
    bottom = jnp.concatenate([-(rt @ skew(translation)), rt], axis=-1)
    return jnp.concatenate([top, bottom], axis=-2)


def spatial_inertia(mass: Float[Array, "*batch"], com: Float[Array, "*batch 3"],
                    inertia: Float[Array, "*batch 3 3"]) -> Float[Array, "*batch 6 6"]:
    """Spatial inertia about the body origin, ``[[I_c + m c̃ c̃ᵀ, m c̃], [m c̃ᵀ, m 1]]``,
    from the mass, the centre of mass and the inertia about the centre of mass."""
    c = skew(com)
    ct = jnp.swapaxes(c, -1, -2)
    m = mass[..., None, None]
    eye = jnp.broadcast_to(jnp.eye(3, dtype=c.dtype), c.shape)
    top = jnp.concatenate([inertia + m * (c @ ct), m * c], axis=-1)
    bottom = jnp.concatenate([m * ct, m * eye], axis=-1)
    return jnp.concatenate([top, bottom], axis=-2)


def body_fixed_xyz_angles(rotation: Float[Array, "3 3"]) -> Float[Array, "3"]:
    """The angles ``(a0, a1, a2)`` with ``rotation = Rx(a0) Ry(a1) Rz(a2)``: the inverse of
    :func:`body_fixed_xyz` for ``|a1| < π/2``, as Simbody's
    ``Rotation::convertRotationToBodyFixedXYZ`` computes them (Sherman et al. (2011)):
    ``a1 = atan2(R02, c)`` with ``c = √((R00² + R01² + R12² + R22²)/2) = cos a1``,
    ``a0 = atan2(-R12, R22)``, ``a2 = atan2(-R01, R00)``."""
    r = rotation
    c = jnp.sqrt(0.5 * (r[0, 0] ** 2 + r[0, 1] ** 2 + r[1, 2] ** 2 + r[2, 2] ** 2))
    return jnp.stack([jnp.arctan2(-r[1, 2], r[2, 2]), jnp.arctan2(r[0, 2], c), jnp.arctan2(-r[0, 1], r[0, 0])])
