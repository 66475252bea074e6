"""OpenSim's Ligament: a passive tension along a ``GeometryPath`` (the muscles' path code)."""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._checks import violated
from .._errors import ModelError
from .._functions import AbstractJointFunction
from .._model import Model, _f
from .._muscles import check_path_force_route, FunctionBasedPath, Muscle, muscle_lengths_and_moment_arms
from .._typing import RealLike
from ._base import AbstractForce


class Ligament(AbstractForce):
    """A ligament (OpenSim's Ligament): tension ``T = F_pcsa · f(L/L_r)`` for ``L > L_r`` and 0
    otherwise, along its path of length ``L(q)``; ``Q = R T`` with the path's moment arms
    ``R = -∂L/∂q`` ([`jaxmb.moment_arms`][jaxmb.moment_arms], Ehsani (2016), Eq. 195), so
    that the ligament is conservative: its work is the change of a potential of ``L``.

    OpenSim applies the tension as point forces along the path frozen at q (its
    computeMomentArm, ``moment_arms(..., method="frozen_path")``), which is ``R T`` where
    the path's length is stationary in its wraps' tangent points (no wrap, a sphere) and
    differs from it over OpenSim's cylinder, ellipsoid and torus rules (concepts page
    "Muscles", R = -dL/dq versus OpenSim's computeMomentArm).

    **Arguments:**

    - `name`: the ligament's name.
    - `path`: its path, a [`jaxmb.Muscle`][jaxmb.Muscle] (points and wraps; the Hill parameters are unused).
    - `force_length_curve`: ``f``, a joint function of coordinate 0 evaluated at
      ``q = (L/L_r,)`` (e.g. an OpenSim ``SimmSpline``), dimensionless.
    - `resting_length`: ``L_r`` (m), > 0.
    - `pcsa_force`: ``F_pcsa`` (N), the force at ``f = 1``.
    - `moment_arms`: ``"closed_form"`` (default: ``R = -∂L/∂q``, a conservative element) or
      ``"frozen_path"`` (OpenSim's applied force, the path frozen at q; it evaluates the
      wraps for their values only). On MoBL-ARMS's four ligaments over ellipsoids the
      second equals OpenSim 4.6's generalized forces to round-off, the first differs from
      them by up to 0.25 % (tests/test_frozen_path.py).
    """

    name: str = eqx.field(static=True)
    path: Muscle
    force_length_curve: AbstractJointFunction
    resting_length: Float[Array, ""]
    pcsa_force: Float[Array, ""]
    moment_arms: str = eqx.field(static=True)

    def __init__(self, name: str, path: Muscle, force_length_curve: AbstractJointFunction,
                 resting_length: RealLike, pcsa_force: RealLike, moment_arms: str = "closed_form"):
        self.name = str(name)
        self.moment_arms = check_path_force_route(f"Ligament {name!r}", "moment_arms", moment_arms, ModelError)
        self.path, self.force_length_curve = path, force_length_curve
        self.resting_length, self.pcsa_force = _f(resting_length), _f(pcsa_force)
        if not isinstance(path, Muscle):
            raise ModelError(f"Ligament {name!r}: path must be a jaxmb.Muscle (its path points), got "
                             f"{type(path).__name__}.")
        if violated(lambda r: r > 0, self.resting_length):
            raise ModelError(f"Ligament {name!r}: resting_length {float(self.resting_length)} must be positive.")
        if force_length_curve.coordinate_indices() not in ((), (0,)):
            raise ModelError(f"Ligament {name!r}: the force-length curve must be a function of coordinate 0 "
                             f"(the normalised length), it reads {force_length_curve.coordinate_indices()}.")

    def with_moment_arms(self, moment_arms: str) -> "Ligament":
        """This ligament with its generalized force by the other definition of ``R``
        (`moment_arms`: ``"closed_form"`` or ``"frozen_path"``)."""
        return Ligament(self.name, self.path, self.force_length_curve, self.resting_length, self.pcsa_force,
                        moment_arms=moment_arms)

    def with_path(self, path: FunctionBasedPath) -> "Ligament":
        """This ligament with its path's points and wraps replaced by `path` (a
        [`jaxmb.FunctionBasedPath`][jaxmb.FunctionBasedPath]), as `Muscle.with_path`."""
        return eqx.tree_at(lambda f: f.path, self, self.path.with_path(path))

    def _one_path_model(self, model: Model) -> Model:
        return eqx.tree_at(lambda m: m.muscles, model, (self.path,))

    def check_model(self, model):
        self.path.check_model(model, owner=f"Ligament {self.name!r}")

    def length_and_moment_arms(self, model: Model, q) -> tuple[Float[Array, ""], Float[Array, " nq"]]:
        """``(L(q), R(q))``: the path's length (m) and moment arms (m or 1), ``-∂L/∂q`` or the
        frozen path's (`moment_arms`)."""
        length, arms = muscle_lengths_and_moment_arms(self._one_path_model(model), q, method=self.moment_arms)
        return length[0], arms[:, 0]

    def tension(self, length) -> Float[Array, ""]:
        """``T(L)`` (N)."""
        x = length / self.resting_length
        taut = x > 1.0
        value = self.force_length_curve(jnp.where(taut, x, 1.0)[None])
        return jnp.where(taut, self.pcsa_force * value, 0.0)

    def generalized_force(self, model, q, qd, control=None):
        length, arms = self.length_and_moment_arms(model, q)
        return arms * self.tension(length).astype(q.dtype)
