"""Passive elements of OpenSim's ForceSet: CoordinateLimitForce, PointToPointSpring,
BushingForce (OpenSim 4.6, ``OpenSim/Simulation/Model``; Simbody's
``Force::TwoPointLinearSpring`` and ``Force::LinearBushing``, Sherman et al. (2011))."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import violated
from .._errors import ModelError
from .._functions import AbstractJointFunction
from .._model import _f
from .._safe import norm
from .._spatial import body_fixed_xyz, body_fixed_xyz_angles, homogeneous
from .._typing import RealLike
from ._base import (AbstractForce, check_body, check_coordinate_force, coordinate_terms, frame_poses,
                    translation)


def _step_up(x, x0, x1):
    """Simbody's ``Function::Step`` from 0 at `x0` to 1 at `x1`: ``u³ (10 - 15 u + 6 u²)``,
    ``u = (x - x0)/(x1 - x0)`` clipped to [0, 1] (C² smooth)."""
    u = jnp.clip((x - x0) / (x1 - x0), 0.0, 1.0)
    return u**3 * (10.0 + u * (6.0 * u - 15.0))


class CoordinateLimitForce(AbstractForce):
    """A soft limit on one coordinate (OpenSim's CoordinateLimitForce):
    ``Q_c = -K_up s_up (q - q_up) + K_lo s_lo (q_lo - q) - c (s_up + s_lo) q'``, where the
    stiffness ramps in over `transition` past each limit by Simbody's C² step
    ``s_up = step(q; q_up, q_up + t)``, ``s_lo = 1 - step(q; q_lo - t, q_lo)``.

    Values in SI units (rad or m); the importer converts OpenSim's degrees.

    **Arguments:**

    - `name`: the element's name.
    - `coordinate`: the coordinate it limits.
    - `upper_stiffness`, `lower_stiffness`: N m/rad (or N/m).
    - `upper_limit`, `lower_limit`: rad (or m).
    - `damping`: N m s/rad (or N s/m), active where the stiffness is.
    - `transition`: rad (or m), > 0: the width over which the stiffness ramps in.
    - `function`: the coordinate as a joint function of ``q`` where it is not an
      independent coordinate (coupled or locked); ``Q = ∇x(q) F(x, x')``.
    """

    name: str = eqx.field(static=True)
    coordinate: str = eqx.field(static=True)
    function: AbstractJointFunction | None
    upper_stiffness: Float[Array, ""]
    upper_limit: Float[Array, ""]
    lower_stiffness: Float[Array, ""]
    lower_limit: Float[Array, ""]
    damping: Float[Array, ""]
    transition: Float[Array, ""]

    def __init__(self, name: str, coordinate: str, upper_stiffness: RealLike, upper_limit: RealLike,
                 lower_stiffness: RealLike, lower_limit: RealLike, damping: RealLike = 0.0,
                 transition: RealLike = 0.1, function: AbstractJointFunction | None = None):
        self.name, self.coordinate, self.function = str(name), str(coordinate), function
        self.upper_stiffness, self.upper_limit = _f(upper_stiffness), _f(upper_limit)
        self.lower_stiffness, self.lower_limit = _f(lower_stiffness), _f(lower_limit)
        self.damping, self.transition = _f(damping), _f(transition)
        if violated(lambda w: w > 0, self.transition):
            raise ModelError(f"CoordinateLimitForce {name!r}: transition {float(self.transition)} must be "
                             "positive (the width over which the limit's stiffness ramps in).")
        if violated(np.less_equal, self.lower_limit, self.upper_limit):
            raise ModelError(f"CoordinateLimitForce {name!r}: lower_limit {float(self.lower_limit)} exceeds "
                             f"upper_limit {float(self.upper_limit)}.")

    def check_model(self, model):
        check_coordinate_force(self, model)

    def limit_force(self, x, xd) -> Float[Array, ""]:
        """The generalized force (N m or N) at the coordinate's value `x` and rate `xd`."""
        s_up = _step_up(x, self.upper_limit, self.upper_limit + self.transition)
        s_lo = 1.0 - _step_up(x, self.lower_limit - self.transition, self.lower_limit)
        return (-self.upper_stiffness * s_up * (x - self.upper_limit)
                + self.lower_stiffness * s_lo * (self.lower_limit - x) - self.damping * (s_up + s_lo) * xd)

    def generalized_force(self, model, q, qd, control=None):
        x, xd, grad = coordinate_terms(self, model, q, qd)
        return grad * self.limit_force(x, xd).astype(q.dtype)


class PointToPointSpring(AbstractForce):
    """A linear spring between a point of `body1` and a point of `body2` (OpenSim's
    PointToPointSpring): potential ``V = ½ k (L - L0)²``, tension ``T = k (L - L0)`` (it
    pushes when compressed), ``Q = -T ∂L/∂q = -∂V/∂q``.

    **Arguments:**

    - `name`: the element's name.
    - `body1`, `body2`: the bodies (``"ground"`` allowed).
    - `point1`, `point2`: `(3,)` the points in their bodies' frames (m).
    - `stiffness`: ``k`` (N/m); `rest_length`: ``L0`` (m).
    """

    name: str = eqx.field(static=True)
    body1: str = eqx.field(static=True)
    body2: str = eqx.field(static=True)
    point1: Float[Array, "3"]
    point2: Float[Array, "3"]
    stiffness: Float[Array, ""]
    rest_length: Float[Array, ""]

    def __init__(self, name: str, body1: str, point1: RealLike, body2: str, point2: RealLike,
                 stiffness: RealLike, rest_length: RealLike = 0.0):
        self.name, self.body1, self.body2 = str(name), str(body1), str(body2)
        self.point1, self.point2 = _f(point1, (3,)), _f(point2, (3,))
        self.stiffness, self.rest_length = _f(stiffness), _f(rest_length)

    def check_model(self, model):
        check_body(self, model, self.body1)
        check_body(self, model, self.body2)

    def length(self, model, q) -> Float[Array, ""]:
        """The distance ``L(q)`` (m) between the two points."""
        dt = jnp.asarray(q).dtype
        a, b = frame_poses(model, q, ((self.body1, translation(self.point1.astype(dt))),
                                      (self.body2, translation(self.point2.astype(dt)))))
        return norm(b[:3, 3] - a[:3, 3])

    def potential_energy(self, model, q) -> Float[Array, ""]:
        """``V = ½ k (L - L0)²`` (J)."""
        return 0.5 * self.stiffness * (self.length(model, q) - self.rest_length) ** 2

    def generalized_force(self, model, q, qd, control=None):
        length, pullback = jax.vjp(lambda x: self.length(model, x), q)
        return -pullback(self.stiffness.astype(q.dtype) * (length - self.rest_length.astype(q.dtype)))[0]


class BushingForce(AbstractForce):
    """A linear bushing between a frame F on `body1` and a frame M on `body2` (OpenSim's
    BushingForce, Simbody's ``Force::LinearBushing``): the deflection
    ``δ = (θ, p)`` holds the body-fixed X-Y-Z angles ``θ`` of M's rotation in F
    (``R_FM = Rx(θ0) Ry(θ1) Rz(θ2)``) and M's origin in F, ``p``; the generalized force
    of ``f_δ = -(k ∘ δ + c ∘ δ')`` is ``Q = (∂δ/∂q)ᵀ f_δ`` (its virtual power ``f_δ · δ'``;
    OpenSim applies the same power-equivalent moment ``N_FMᵀ f_θ`` and force ``f_p``).

    **Arguments:**

    - `name`: the element's name.
    - `body1`, `body2`: the bodies (``"ground"`` allowed).
    - `frame1`, `frame2`: `(4, 4)` the frames F and M in their bodies (default the body frames);
      see `frame_from_xyz`.
    - `rotational_stiffness`, `translational_stiffness`: `(3,)` N m/rad and N/m.
    - `rotational_damping`, `translational_damping`: `(3,)` N m s/rad and N s/m.
    """

    name: str = eqx.field(static=True)
    body1: str = eqx.field(static=True)
    body2: str = eqx.field(static=True)
    frame1: Float[Array, "4 4"]
    frame2: Float[Array, "4 4"]
    rotational_stiffness: Float[Array, "3"]
    translational_stiffness: Float[Array, "3"]
    rotational_damping: Float[Array, "3"]
    translational_damping: Float[Array, "3"]

    def __init__(self, name: str, body1: str, body2: str, *, frame1: RealLike | None = None,
                 frame2: RealLike | None = None, rotational_stiffness: RealLike = (0.0, 0.0, 0.0),
                 translational_stiffness: RealLike = (0.0, 0.0, 0.0),
                 rotational_damping: RealLike = (0.0, 0.0, 0.0), translational_damping: RealLike = (0.0, 0.0, 0.0)):
        self.name, self.body1, self.body2 = str(name), str(body1), str(body2)
        self.frame1 = _f(jnp.eye(4) if frame1 is None else frame1, (4, 4))
        self.frame2 = _f(jnp.eye(4) if frame2 is None else frame2, (4, 4))
        self.rotational_stiffness = _f(rotational_stiffness, (3,))
        self.translational_stiffness = _f(translational_stiffness, (3,))
        self.rotational_damping = _f(rotational_damping, (3,))
        self.translational_damping = _f(translational_damping, (3,))

    @staticmethod
    def frame_from_xyz(translation: RealLike, xyz_angles: RealLike) -> Float[Array, "4 4"]:
        """The pose (4x4) of a frame at `translation` (m) with body-fixed X-Y-Z `xyz_angles`
        (rad) in its body (an OpenSim PhysicalOffsetFrame)."""
        return homogeneous(body_fixed_xyz(_f(xyz_angles, (3,))), _f(translation, (3,)))

    def check_model(self, model):
        check_body(self, model, self.body1)
        check_body(self, model, self.body2)

    def deflection(self, model, q) -> Float[Array, "6"]:
        """``δ(q) = (θ, p)``: M's body-fixed X-Y-Z angles (rad) and origin (m) in F."""
        dt = jnp.asarray(q).dtype
        f, m = frame_poses(model, q, ((self.body1, self.frame1.astype(dt)), (self.body2, self.frame2.astype(dt))))
        r_f = f[:3, :3]
        return jnp.concatenate([body_fixed_xyz_angles(r_f.T @ m[:3, :3]), r_f.T @ (m[:3, 3] - f[:3, 3])])

    def potential_energy(self, model, q) -> Float[Array, ""]:
        """``V = ½ Σ k_i δ_i²`` (J)."""
        k = jnp.concatenate([self.rotational_stiffness, self.translational_stiffness])
        return 0.5 * jnp.sum(k * self.deflection(model, q) ** 2)

    def generalized_force(self, model, q, qd, control=None):
        deflection = lambda x: self.deflection(model, x)  # noqa: E731
        delta, rate = jax.jvp(deflection, (q,), (qd,))
        k = jnp.concatenate([self.rotational_stiffness, self.translational_stiffness]).astype(q.dtype)
        c = jnp.concatenate([self.rotational_damping, self.translational_damping]).astype(q.dtype)
        f = -(k * delta + c * rate)
        return jax.vjp(deflection, q)[1](f)[0]
