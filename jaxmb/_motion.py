"""Inverse dynamics over a whole motion, as OpenSim's Inverse Dynamics tool computes it.

The coordinates are smoothed and differentiated as OpenSim 4.6's InverseDynamicsTool
does (optional low-pass filter with padding, then interpolating quintic GCV splines;
`jaxmb._signal`), external loads (OpenSim's ``ExternalForce``: a force at a point and
a torque, each expressed in ground or a body) are sampled at the solved frames by
interpolating cubic splines (OpenSim's ``GCVSpline(3, ...)``), and the generalized
forces of every frame come from one batched (``vmap``) inverse dynamics.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._checks import nonfinite_rows, real_argument
from ._dynamics import inverse_dynamics
from ._errors import ModelError
from ._forces._base import translation, wrench_generalized_force
from ._functions._splines import _cubic_spline_coefficients
from ._kinematics import body_transforms
from ._model import GROUND, Model
from ._signal import opensim_coordinate_operators

__all__ = ["ExternalForce", "MotionInverseDynamics", "inverse_dynamics_motion"]

# Samples beyond the solved frames kept for a cubic spline's fit: the influence of a
# sample on an interpolating cubic spline decays by 2 - √3 ≈ 0.27 per knot, so 40
# knots away it is below 1e-22 (relative).
_SPLINE_MARGIN = 40


@dataclasses.dataclass(frozen=True)
class ExternalForce:
    """A force at a point and a torque applied to a body over time (OpenSim's ``ExternalForce``).

    **Arguments:**

    - `name`: the force's name (for messages).
    - `applied_to_body`: the body it acts on (a model body, not ground).
    - `time`: the sample times (n,), s, strictly increasing.
    - `force`: (n, 3) N, or ``None`` for a pure torque.
    - `point`: (n, 3) m, the point of application, or ``None`` for the body's origin.
    - `torque`: (n, 3) N m, or ``None``.
    - `force_expressed_in_body`: the frame of `force` and `torque` (``"ground"`` or a body).
    - `point_expressed_in_body`: the frame of `point` (``"ground"`` or a body).

    Samples are interpolated with a natural cubic spline (OpenSim's ``GCVSpline`` of
    degree 3 with error variance 0). They must cover the frames solved within the
    motion's own times (`inverse_dynamics_motion` and `static_optimization` raise a
    ``ValueError`` otherwise; the frames of the filter's padding beyond the motion are
    extrapolated, as the motion is).
    """

    name: str
    applied_to_body: str
    time: np.ndarray
    force: np.ndarray | None = None
    point: np.ndarray | None = None
    torque: np.ndarray | None = None
    force_expressed_in_body: str = GROUND
    point_expressed_in_body: str = GROUND

    def __post_init__(self):
        time = np.asarray(self.time, dtype=float)
        object.__setattr__(self, "time", time)
        if time.ndim != 1 or time.size < 2 or not np.all(np.diff(time) > 0):
            raise ValueError(f"ExternalForce {self.name!r}: time must be 1-D, strictly increasing, >= 2 samples.")
        for field in ("force", "point", "torque"):
            value = getattr(self, field)
            if value is not None:
                value = np.asarray(value, dtype=float)
                if value.shape != (time.size, 3):
                    raise ValueError(f"ExternalForce {self.name!r}: {field} must have shape ({time.size}, 3) "
                                     f"(one row per time), got {value.shape}.")
                if not np.all(np.isfinite(value)):
                    row, col = np.argwhere(~np.isfinite(value))[0]
                    raise ValueError(f"ExternalForce {self.name!r}: {field} must be finite; its component "
                                     f"{'xyz'[col]} is {value[row, col]} at time {time[row]:g} s (row {row}).")
                object.__setattr__(self, field, value)
        if self.force is None and self.torque is None:
            raise ValueError(f"ExternalForce {self.name!r} applies neither a force nor a torque.")

    def check(self, model: Model) -> None:
        """Raise [`jaxmb.ModelError`][jaxmb.ModelError] where a body it names is not in `model`."""
        for role, body, ground_ok in (("applied_to_body", self.applied_to_body, False),
                                      ("force_expressed_in_body", self.force_expressed_in_body, True),
                                      ("point_expressed_in_body", self.point_expressed_in_body, True)):
            if (body == GROUND and ground_ok) or (body != GROUND and body in model.body_names):
                continue
            close = difflib.get_close_matches(body, model.body_names, n=3, cutoff=0.5)
            hint = f" (closest bodies: {', '.join(close)})" if close else ""
            raise ModelError(f"ExternalForce {self.name!r}: {role} {body!r} is not a body of model "
                             f"{model.name!r}{hint}; name one of {model.body_names}"
                             f"{' or ground' if ground_ok else ''}.")

    def check_times(self, start: float, end: float, caller: str) -> None:
        """A ``ValueError`` where the samples do not cover the motion's span ``[start, end]``
        (s): the spline would extrapolate the load linearly from its end slopes (loads of
        another trial, or a clipped file, applied silently)."""
        slack = 1e-9 * max(1.0, abs(start), abs(end))
        if self.time[0] > start + slack or self.time[-1] < end - slack:
            raise ValueError(f"{caller}: ExternalForce {self.name!r} is sampled over [{self.time[0]:g}, "
                             f"{self.time[-1]:g}] s, which does not cover the motion's [{start:g}, {end:g}] s; "
                             "give loads sampled over the whole motion (or a time_range inside their span).")

    def sample(self, times) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(force, point, torque)``, each (k, 3), at `times` (k,); zeros where absent.

        Each frame is interpolated by the natural cubic spline through the
        ``2 * 40 + 2`` samples around it: the influence of a sample on an interpolating
        cubic spline decays by ``2 - √3 ≈ 0.27`` per knot, so this equals the spline
        through all samples (OpenSim's) to round-off, at a cost that does not grow with
        the length of the data. The spline is linear in the samples: one matrix, built
        from the times alone (`cubic_sampling_operator`), maps them to the frames."""
        times = np.asarray(times, dtype=float)
        w = cubic_sampling_operator(self.time, times)
        return tuple(np.zeros((times.size, 3)) if data is None else w @ data
                     for data in (self.force, self.point, self.torque))


def check_load_times(externals, time, frames, caller: str) -> None:
    """Each external force covers the frames solved within the motion's own times (the
    frames of the filter's padding beyond them are extrapolated, as the motion is)."""
    time, frames = np.asarray(time), np.asarray(frames)
    inside = frames[(frames >= time[0]) & (frames <= time[-1])]
    if inside.size:
        for ext in externals:
            ext.check_times(float(inside[0]), float(inside[-1]), caller)


def cubic_sampling_operator(time, times) -> np.ndarray:
    """The (k, n) matrix ``W`` with ``W @ y`` the values at `times` (k,) of the natural cubic
    spline through samples ``y`` (n, ...) at `time` (n,), as `ExternalForce.sample`
    interpolates (each frame from the ``2 * 40 + 2`` samples around it; linear extrapolation
    with the end slopes outside `time`). Read-only; cached on the times' values, so that
    repeated calls on one motion do not refit."""
    return _cubic_operator(tuple(np.asarray(time, dtype=float).tolist()),
                           tuple(np.asarray(times, dtype=float).ravel().tolist()))


@functools.lru_cache(maxsize=16)
def _cubic_operator(time: tuple, times: tuple) -> np.ndarray:
    """`cubic_sampling_operator` for hashable arguments: the windowed fit applied to the
    unit samples of each window (the spline's values are linear in the samples)."""
    time, times = np.array(time), np.array(times)
    n, k = time.size, times.size
    width = min(2 * _SPLINE_MARGIN + 2, n)
    j = np.searchsorted(time, times, side="right") - 1
    start = np.clip(j - width // 2 + 1, 0, n - width)
    idx = start[:, None] + np.arange(width)  # (k, width): each frame's window of samples
    x = time[idx]
    local = np.clip(j - start, 0, width - 2)
    y = np.broadcast_to(np.eye(width), (k, width, width))  # (frame, unit sample, knot)
    b, c, d = (np.asarray(v) for v in _fit_natural_cubic(jnp.asarray(x), jnp.asarray(y)))
    pick = lambda v: np.take_along_axis(v, local[:, None, None], axis=2)[..., 0]  # noqa: E731  (k, width)
    t = (times - x[np.arange(k), local])[:, None]
    on_window = pick(y) + t * (pick(b) + t * (pick(c) + t * pick(d)))
    first, last = np.eye(width)[0], np.eye(width)[-1]  # below: start = 0; above: start = n - width
    on_window = np.where((times < time[0])[:, None], first + pick(b) * (times[:, None] - time[0]), on_window)
    on_window = np.where((times > time[-1])[:, None], last + pick(b) * (times[:, None] - time[-1]), on_window)
    w = np.zeros((k, n))
    np.put_along_axis(w, idx, on_window, axis=1)
    w.setflags(write=False)
    return w


@jax.jit
def _fit_natural_cubic(x, y):
    """Natural cubic spline coefficients ``(b, c, d)``, each (k, 3, w), of the data `y`
    (k, 3, w) at knots `x` (k, w): one spline per frame and component."""
    per_frame = jax.vmap(lambda row, knots: _cubic_spline_coefficients(jnp, knots, row, "natural"),
                         in_axes=(0, None))
    return jax.vmap(per_frame)(y, x)


class MotionInverseDynamics(eqx.Module):
    """Generalized forces over a motion, with the kinematics they were computed from.

    - `time`: the solved frames (k,), s.
    - `q`, `qd`, `qdd`: the smoothed coordinates and their first two time derivatives (k, nq).
    - `forces`: the generalized forces (k, nq): N m for rotational coordinates, N for
      translational ones (OpenSim's ``<coordinate>_moment`` / ``<coordinate>_force``).
    """

    time: Float[Array, " k"]
    q: Float[Array, "k nq"]
    qd: Float[Array, "k nq"]
    qdd: Float[Array, "k nq"]
    forces: Float[Array, "k nq"]


def _frame(model: Model, poses, name: str, dtype):
    """Ground rotation and origin of `name` (ground: identity)."""
    if name == GROUND:
        return jnp.eye(3, dtype=dtype), jnp.zeros(3, dtype)
    pose = poses[model.body_index(name)]
    return pose[:3, :3], pose[:3, 3]


def _spec(ext: ExternalForce) -> tuple:
    """The static (hashable) part of an external force: its frames and what it applies."""
    return (ext.applied_to_body, ext.force_expressed_in_body, ext.point_expressed_in_body,
            ext.force is not None, ext.point is not None, ext.torque is not None)


def _external_generalized_force(model: Model, specs, q, samples):
    """``Σ J_pᵀ F + J_ωᵀ τ`` of the external forces at one frame: each a wrench (ground axes)
    at its point on the body, by their virtual power (`wrench_generalized_force`: each
    loaded body's motion along its path, once per body)."""
    poses = body_transforms(model, q)
    frames, wrenches = [], []
    for (body, force_frame, point_frame, has_force, has_point, has_torque), (force, point, torque) in zip(
            specs, samples):
        body_rot, body_org = _frame(model, poses, body, q.dtype)
        f_rot, _ = _frame(model, poses, force_frame, q.dtype)
        on_body = jnp.zeros(3, q.dtype)
        if has_force:
            p_rot, p_org = _frame(model, poses, point_frame, q.dtype)
            on_body = body_rot.T @ (p_rot @ point + p_org - body_org) if has_point else point
        frames.append((body, translation(on_body)))
        wrenches.append((f_rot @ torque if has_torque else jnp.zeros(3, q.dtype),
                         f_rot @ force if has_force else jnp.zeros(3, q.dtype)))
    return wrench_generalized_force(model, q, tuple(frames), tuple(wrenches))


@eqx.filter_jit
def _solve(model, specs, q, qd, qdd, samples):
    def one(qi, qdi, qddi, si):
        tau = inverse_dynamics(model, qi, qdi, qddi)
        if specs:
            tau = tau - _external_generalized_force(model, specs, qi, si)
        return tau

    return jax.vmap(one)(q, qd, qdd, samples)


def motion_coordinates(caller: str, model: Model, time, q) -> tuple[np.ndarray, Array]:
    """``(time, q)`` of a motion as NumPy times (n,) and a JAX array (n, nq), checked: the
    shape against the model, and (when concrete) every sample finite, else a
    ``ModelError`` naming `caller` and the first frames that are not (a NaN would
    spread through the splines to every frame)."""
    time = np.asarray(time, dtype=float)
    q = real_argument(q, caller, "q")  # integers promoted (static optimization's filters need a float)
    if q.ndim != 2 or q.shape != (time.size, model.nq):
        raise ModelError(f"{caller}: q must have shape (n, nq) = ({time.size}, {model.nq}) "
                         f"for {time.size} times and model {model.name!r}, got {q.shape}.")
    bad = nonfinite_rows(q)
    if bad.size:
        raise ModelError(f"{caller}: q is not finite at {bad.size} frame{'s' if bad.size > 1 else ''} (first at t = "
                         f"{', '.join(f'{t:g}' for t in time[bad[:5]])} s): fill the gaps (e.g. by interpolation) "
                         "or cut the motion before them; the splines would carry a NaN to every frame.")
    return time, q


def inverse_dynamics_motion(model: Model, time: Float[np.ndarray, " n"], q: Float[Array | np.ndarray, "n nq"], *,
                            lowpass_hz: float | None = None,
                            time_range: tuple[float, float] | None = None,
                            external_loads=()) -> MotionInverseDynamics:
    """Generalized forces over a whole motion, as OpenSim's Inverse Dynamics tool.

    At every frame ``τ = M(q) q'' + N(q, q') q' - G(q) - Q_loads(q) - Σ (J_pᵀ F + J_ωᵀ τ_ext)``
    (Ehsani 2016, Eq. 46; Delp et al. 2007): the model's gravity and its loads
    (`model.loads`, e.g. springs) are included, muscles excluded (they are not loads;
    OpenSim's tool excludes ``Muscles`` likewise), external forces subtracted. ``q, q', q''``
    come from the samples as in OpenSim 4.6: optional low-pass filter with padding, then
    interpolating quintic GCV splines (Woltring 1986), built once from the times as
    linear maps of the samples. The frames
    are batched with `vmap`; the result is differentiable with respect to `q` and the
    model's parameters.

    **Arguments:**

    - `model`: the [`jaxmb.Model`][jaxmb.Model].
    - `time`: sample times (n,), s, strictly increasing; concrete (NumPy), not traced.
    - `q`: coordinates (n, nq), model order, rad and m
      ([`jaxmb.io.coordinates_from_motion`][jaxmb.io.coordinates_from_motion] reads a file).
    - `lowpass_hz`: low-pass cutoff (Hz) of OpenSim's third-order Butterworth filter run
      forward and backward, or ``None`` (default) for none.
    - `time_range`: ``(start, end)`` s; frames from the last at or before `start` to the
      last at or before `end` (OpenSim's rule). ``None``: the motion's own first and last
      times (OpenSim's default, unbounded, also solves the frames of the padding).
    - `external_loads`: a sequence of [`jaxmb.ExternalForce`][jaxmb.ExternalForce]
      ([`jaxmb.io.read_external_loads`][jaxmb.io.read_external_loads] reads OpenSim's XML).

    **Returns:**

    A [`jaxmb.MotionInverseDynamics`][jaxmb.MotionInverseDynamics]: the frames
    (resampled where filtering needed a uniform step) and ``q, q', q'', τ`` (k, nq).
    """
    time, q = motion_coordinates("inverse_dynamics_motion", model, time, q)
    externals = tuple(external_loads)
    for ext in externals:
        if not isinstance(ext, ExternalForce):
            raise TypeError(f"external_loads must hold jaxmb.ExternalForce, got {type(ext).__name__}.")
        ext.check(model)
    frames, w0, w1, w2 = opensim_coordinate_operators(time, lowpass_hz=lowpass_hz, time_range=time_range)
    check_load_times(externals, time, frames, "inverse_dynamics_motion")
    w0, w1, w2 = (jnp.asarray(w, dtype=q.dtype) for w in (w0, w1, w2))
    qs, qds, qdds = w0 @ q, w1 @ q, w2 @ q
    samples = tuple(tuple(jnp.asarray(a, dtype=q.dtype) for a in ext.sample(frames)) for ext in externals)
    # Per frame: a tuple of (force, point, torque) per external force, batched on axis 0.
    forces = _solve(model, tuple(_spec(e) for e in externals), qs, qds, qdds, samples)
    return MotionInverseDynamics(jnp.asarray(frames, dtype=q.dtype), qs, qds, qdds, forces)
