"""The shoulder study of Ehsani (2016), section 4-4 C: MoBL-ARMS's shoulder tracking a
desired elevation by computed-torque control (Eq. 200-201), the torques it needs
(Fig. 19-20), and the hook for the muscle force sharing of Fig. 21.

The shoulder rhythm is embedded: the clavicle and scapula rotations are joint
functions (MoBL-ARMS's coupled coordinates, splines of ``shoulder_elv``) of the three
coordinates ``q = (elv_angle, shoulder_elv, shoulder_rot)``, so the equations of motion
are an ODE in ``q`` (Ehsani 2016, Eq. 198). `jaxmb.studies.track_shoulder_dae` solves
the same tracking with the rhythm as algebraic constraints, for the cost comparison.
"""

from __future__ import annotations


import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._checks import flag, is_count, violated
from .._control import ComputedTorque
from .._errors import ModelError
from .._kinematics import joint_transforms, joint_values
from .._model import Body, Model
from .._simulate import simulate
from .._spatial import motion_transform, skew, spatial_inertia, vee
from .._typing import RealLike

#: The independent coordinates of the study, in the order of ``q``: plane of elevation,
#: elevation and axial rotation (MoBL-ARMS's names).
SHOULDER_COORDINATES = ("elv_angle", "shoulder_elv", "shoulder_rot")
#: MoBL-ARMS's coordinates distal to the shoulder, held fixed in the study.
DISTAL_COORDINATES = ("elbow_flexion", "pro_sup", "deviation", "flexion")
#: The 14 musculotendon units of Ehsani (2016), Fig. 21, by their MoBL-ARMS names:
#: deltoid (anterior, middle, posterior), supraspinatus, infraspinatus, subscapularis,
#: teres minor, teres major, pectoralis major (clavicular, sternal, ribs), latissimus
#: dorsi (thoracic, lumbar, iliac).
SHOULDER_MUSCLES = ("DELT1", "DELT2", "DELT3", "SUPSP", "INFSP", "SUBSC", "TMIN", "TMAJ", "PECM1", "PECM2",
                    "PECM3", "LAT1", "LAT2", "LAT3")


def _phantoms_massless(model: Model) -> Model:
    """`model` with its phantom bodies (a radius of gyration over 1 m: MoBL-ARMS's
    1e-4 kg bodies with 1 kg m² of inertia, SIMM's moving via points) made massless."""
    bodies = []
    for b in model.bodies:
        mass, inertia = float(b.mass), np.asarray(b.inertia)
        phantom = not b.massless and mass > 0 and np.sqrt(np.max(np.linalg.eigvalsh(inertia)) / mass) > 1.0
        bodies.append(Body.virtual(b.name) if phantom else b)
    return Model(bodies, model.joints, model.coordinate_names, gravity=model.gravity, loads=model.loads,
                 q_default=model.q_default, q_lower=model.q_lower, q_upper=model.q_upper, muscles=model.muscles,
                 name=model.name, forces=model.forces)


def _fixed_to(model: Model) -> dict[int, int]:
    """``{body: the body it is rigidly fixed to}`` for the bodies that `model`'s constant
    (locked or welded) joints fix, together with all their descendants, to a body that
    moves: each body of such a subtree maps to the subtree's parent. Static (the
    joint functions' coordinates and the tree only)."""
    fixed = [not j.function.coordinate_indices() for j in model.joints]

    def rigid(i):
        return fixed[i] and all(rigid(c) for c in model.children(i))

    out = {}
    for i in model.order:
        p = model.parents[i]
        if p >= 0 and rigid(i):
            out[i] = out.get(p, p)
    return out


def _welded(model: Model) -> Model:
    """`model` with each rigid subtree of `_fixed_to` merged into the body it is fixed
    to: one rigid body with the composite inertia ``Σ X_kᵀ I_k X_k`` (spatial inertias
    carried to that body's frame, as the composite-rigid-body algorithm does;
    Featherstone 2008, section 6.2). The same mass matrix and bias forces, from fewer
    bodies: MoBL-ARMS's shoulder with the elbow, forearm and wrist locked (six bodies
    fixed to the humerus) has a chain of 14 bodies instead of 20. A model with loads or
    force elements (which name bodies) is returned as it is; muscles, which the
    forward dynamics does not read, are left out. Traceable: under ``jit``
    the composite inertias are computed from the model's arrays."""
    fixed = _fixed_to(model)
    if not fixed or model.loads or model.forces:
        return model
    # Constant joints: their transforms do not depend on q.
    local = joint_transforms(model, joint_values(model, jnp.zeros(model.nq, dtype=model.bodies[0].mass.dtype)))
    pose = {}  # merged body -> its pose in the body it is fixed to
    for i in model.order:
        if i in fixed:
            p = model.parents[i]
            pose[i] = local[i] if p not in fixed else pose[p] @ local[i]
    bodies = []
    for i, b in enumerate(model.bodies):
        if i in fixed:
            continue
        parts = [k for k, t in fixed.items() if t == i and not model.bodies[k].massless]
        if not parts:
            bodies.append(b)
            continue
        total = sum((motion_transform(pose[k][:3, :3], pose[k][:3, 3]).T
                     @ spatial_inertia(model.bodies[k].mass, model.bodies[k].com, model.bodies[k].inertia)
                     @ motion_transform(pose[k][:3, :3], pose[k][:3, 3]) for k in parts),
                    jnp.zeros((6, 6), b.mass.dtype) if b.massless else spatial_inertia(b.mass, b.com, b.inertia))
        mass = total[3, 3]
        com = vee(total[:3, 3:]) / mass
        c = skew(com)
        inertia = total[:3, :3] - mass * c @ c.T
        bodies.append(Body(b.name, mass, com, 0.5 * (inertia + inertia.T)))
    keep = [i for i in range(model.n_bodies) if i not in fixed]
    return Model(bodies, [model.joints[i] for i in keep], model.coordinate_names, gravity=model.gravity,
                 q_default=model.q_default, q_lower=model.q_lower, q_upper=model.q_upper, name=model.name)


def locked_coordinates(distal: dict[str, float] | None = None) -> dict[str, float]:
    """The ``locked=`` mapping of [`jaxmb.io.read_osim`][jaxmb.io.read_osim] that reduces
    MoBL-ARMS to the study's shoulder: every coordinate of `DISTAL_COORDINATES` held.

    **Arguments:**

    - `distal`: ``{coordinate: value}`` in rad (default: all 0, the elbow extended and the
      forearm and wrist neutral); any coordinate not named is held at 0.

    **Returns:**

    ``{coordinate: value}`` for every name of `DISTAL_COORDINATES`, rad.

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] if `distal` names another coordinate.
    """
    values = {name: 0.0 for name in DISTAL_COORDINATES}
    for name, value in (distal or {}).items():
        if name not in values:
            raise ModelError(f"locked_coordinates: distal names {name!r}; the locked coordinates are "
                             f"{DISTAL_COORDINATES}.")
        values[name] = float(value)
    return values


def shoulder_model(model: Model, *, phantoms: bool = False) -> Model:
    """MoBL-ARMS (Saul et al. 2015) reduced to its shoulder: ``q = (elv_angle,
    shoulder_elv, shoulder_rot)``, the elbow, forearm and wrist locked.

    The clavicle and scapula follow the elevation through the model's coupled
    coordinates (its simplification of de Groot and Brand's (2001) rhythm, Holzbaur et
    al. 2005), i.e. the empirically-based joints of Ehsani (2016), section 4-4 C. The
    dissertation's model has no forearm (thorax, clavicle, scapula, humerus); here the
    forearm and hand stay rigidly attached to the humerus, as locked coordinates
    (OpenSim's ``locked``). The file is read by `jaxmb.io` (this layer reads none):

    ```python
    osim = mb.io.read_osim("MOBL_ARMS_fixed_41.osim", muscles=False, locked=studies.locked_coordinates())
    model = studies.shoulder_model(osim.model)
    ```

    (``muscles=True`` in `read_osim` for the force sharing of Fig. 21; their paths make
    the first compilation of a muscle computation take minutes, the tracking needs none.)

    **Arguments:**

    - `model`: MoBL-ARMS as read with ``locked=locked_coordinates(...)``.
    - `phantoms`: keep the inertia of MoBL-ARMS's four phantom bodies (1e-4 kg with
      1 kg m² each, carriers of moving via points in SIMM; OpenSim's mass matrix
      includes them). By default they are made massless: 1 kg m² about the shoulder
      is more than the whole arm's inertia, and the dissertation's segments
      (Quental et al. 2012) have no such bodies.

    **Returns:**

    The [`jaxmb.Model`][jaxmb.Model], with ``coordinate_names ==`` `SHOULDER_COORDINATES`.

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] if `model` leaves other coordinates free.
    """
    if tuple(model.coordinate_names) != SHOULDER_COORDINATES:
        raise ModelError(f"shoulder_model: model {model.name!r} leaves the coordinates {model.coordinate_names} "
                         f"free; the shoulder study needs MoBL-ARMS's coordinates {SHOULDER_COORDINATES} free "
                         f"and {DISTAL_COORDINATES} locked (read MOBL_ARMS_fixed_41.osim with "
                         "locked=studies.locked_coordinates()).")
    return model if flag(phantoms, "shoulder_model: phantoms") else _phantoms_massless(model)


class ElevationTrajectory(eqx.Module):
    """The desired motion of the study (Ehsani 2016, Fig. 19): the plane of elevation
    and the axial rotation held, the elevation raised and lowered smoothly,

    ``elevation(t) = low + (high - low) (1 - cos(2π t / period)) / 2``,

    so that rate and acceleration start at rest and are continuous.

    **Arguments:**

    - `plane`: the plane of elevation, rad (default π/2, 90 degrees).
    - `rotation`: the axial rotation, rad (default -π/6, -30 degrees).
    - `low`, `high`: the lowest and highest elevation, rad (default 20 and 110 degrees).
    - `period`: the duration of one raise and lowering, s (default 2).

    Called at a time ``t`` (s) it returns ``(q_des, qd_des, qdd_des)``, each (3,), in
    rad, rad/s and rad/s², in the order of `SHOULDER_COORDINATES`.
    """

    plane: Float[Array, ""]
    rotation: Float[Array, ""]
    low: Float[Array, ""]
    high: Float[Array, ""]
    period: Float[Array, ""]

    def __init__(self, plane: RealLike = np.pi / 2, rotation: RealLike = -np.pi / 6,
                 low: RealLike = np.deg2rad(20.0), high: RealLike = np.deg2rad(110.0), period: RealLike = 2.0):
        values = dict(plane=plane, rotation=rotation, low=low, high=high, period=period)
        for name, v in values.items():
            if isinstance(v, jax.core.Tracer):
                continue
            if np.ndim(v) != 0 or not np.isfinite(float(v)):
                raise ValueError(f"ElevationTrajectory: {name} must be a finite scalar, got {v!r}.")
        if not isinstance(period, jax.core.Tracer) and float(period) <= 0:
            raise ValueError(f"ElevationTrajectory: period must be positive (s), got {period!r}.")
        for name, v in values.items():
            setattr(self, name, jnp.asarray(v, dtype=float))

    def __call__(self, t):
        t = jnp.asarray(t)
        dtype = jnp.result_type(t.dtype, self.period.dtype) if jnp.issubdtype(t.dtype, jnp.floating) \
            else self.period.dtype
        t = t.astype(dtype)
        plane, rot, low, high, period = (jnp.asarray(x, dtype) for x in
                                         (self.plane, self.rotation, self.low, self.high, self.period))
        w = 2 * jnp.pi / period
        half = (high - low) / 2
        zero = jnp.zeros((), dtype)
        q = jnp.stack([plane, low + half * (1 - jnp.cos(w * t)), rot])
        qd = jnp.stack([zero, half * w * jnp.sin(w * t), zero])
        qdd = jnp.stack([zero, half * w**2 * jnp.cos(w * t), zero])
        return q, qd, qdd


def computed_torque(model: Model, trajectory, gains: RealLike = (100.0, 100.0, 1000.0)) -> ComputedTorque:
    """Ehsani's (2016) computed-torque law, Eq. 200-201, as a `jaxmb.control.ComputedTorque`.

    Eq. 200 solved for the torque is ``tau = M(q) Q_d + N(q, q') q' - G(q)``, inverse
    dynamics at the commanded acceleration ``Q_d = q''_des - 2 K (q' - q'_des) -
    K² (q - q_des)`` (Eq. 201), so ``kd = 2K`` and ``kp = K²`` (critically damped error).

    **Arguments:**

    - `model`: the model (its inverse dynamics).
    - `trajectory`: ``t -> (q_des, qd_des, qdd_des)``.
    - `gains`: the diagonal of ``K``, 1/s, (nq,) (the dissertation's ``(100, 100, 1000)``).

    **Returns:**

    The controller.
    """
    k = jnp.asarray(gains, dtype=float)
    if violated(lambda x: x > 0.0, k):  # kp = K² would hide the sign; kd = 2K < 0 is anti-damping
        raise ValueError(f"computed_torque: gains must be positive (1/s), got {np.asarray(k).tolist()}.")
    return ComputedTorque(model, trajectory, kp=k**2, kd=2 * k)


class ShoulderTracking(eqx.Module):
    """The result of `track_shoulder` (and of `track_shoulder_dae`), at the frames `ts`.

    - `ts`: (T,) s.
    - `q`, `qd`: (T, 3) the achieved coordinates (rad) and rates (rad/s).
    - `q_ref`, `qd_ref`, `qdd_ref`: (T, 3) the desired motion.
    - `qdd`: (T, 3) the commanded acceleration ``Q_d`` (Eq. 201), rad/s².
    - `tau`: (T, 3) the required generalized forces (Fig. 20), N m.
    - `num_steps`: the integrator's steps.
    - `drift`: (T,) the largest constraint residual ``max |Φ|`` (rad) on the DAE route,
      zeros on the embedded one (which has no constraint to violate).
    """

    ts: Float[Array, " T"]
    q: Float[Array, "T 3"]
    qd: Float[Array, "T 3"]
    q_ref: Float[Array, "T 3"]
    qd_ref: Float[Array, "T 3"]
    qdd_ref: Float[Array, "T 3"]
    qdd: Float[Array, "T 3"]
    tau: Float[Array, "T 3"]
    num_steps: Array
    drift: Float[Array, " T"]


def _frames(trajectory, t1, n_frames):
    if not is_count(n_frames, 2):  # int() cut 2.7 to 2; one frame (t = 0) simulated nothing
        raise ValueError(f"track_shoulder: n_frames must be an integer >= 2 (the first at t = 0, the last at t1), "
                         f"got {n_frames!r}.")
    if not isinstance(trajectory, ElevationTrajectory):  # its period is the default t1
        raise TypeError(f"track_shoulder: trajectory must be a studies.ElevationTrajectory, got "
                        f"{type(trajectory).__name__}; track another reference with studies.computed_torque and "
                        "jaxmb.simulate.")
    if t1 is not None and violated(lambda t: np.isfinite(t) & (t > 0.0), t1):
        raise ValueError(f"track_shoulder: t1 must be a positive finite time (s), got {t1!r}.")
    t1 = trajectory.period if t1 is None else jnp.asarray(t1, dtype=trajectory.period.dtype)
    return jnp.linspace(0.0, 1.0, n_frames, dtype=t1.dtype) * t1


def track_shoulder(model: Model, trajectory: ElevationTrajectory | None = None, *,
                   gains: RealLike = (100.0, 100.0, 1000.0), t1: RealLike | None = None, n_frames: int = 201,
                   solver: str = "tsit5", rtol: float = 1e-10, atol: float = 1e-10,
                   max_steps: int = 100_000) -> ShoulderTracking:
    """Track `trajectory` with computed-torque control (Ehsani 2016, Eq. 200-201) by
    [`jaxmb.simulate`][jaxmb.simulate], starting on the desired motion, and return the required
    torques (Fig. 20).

    **Arguments:**

    - `model`: `shoulder_model`'s model (or any model with three coordinates).
    - `trajectory`: the desired motion (default `ElevationTrajectory()`).
    - `gains`: the diagonal of ``K`` (1/s).
    - `t1`: the end time, s (default: one period); `n_frames`: saved frames on
      ``[0, t1]``.
    - `solver`, `rtol`, `atol`, `max_steps`: as in `jaxmb.simulate` (an explicit
      embedded Runge-Kutta pair of order 5(4), as the dissertation's Runge-Kutta-Fehlberg;
      the gain 1000 puts a double eigenvalue at -1000/s in the closed loop, which
      bounds an explicit solver's step by stability rather than accuracy).

    The bodies that the locked coordinates fix to the humerus (ulna, radius, hand) are
    merged into it, with their composite inertia, before the simulation: the same
    equations of motion from a chain of fewer bodies.

    **Returns:**

    A `ShoulderTracking`. Works under ``jax.jit`` (with `n_frames` and `solver`
    static) and ``jax.vmap`` over trajectories or gains.
    """
    trajectory = ElevationTrajectory() if trajectory is None else trajectory
    # The plant and the controller's model: the bodies the locked coordinates fix to the
    # humerus merged into it (the same dynamics from a shorter chain of bodies).
    model = _welded(model)
    controller = computed_torque(model, trajectory, gains)
    ts = _frames(trajectory, t1, n_frames)
    q0, qd0, _ = trajectory(ts[0])
    sol = simulate(model, q0, qd0, ts[-1], ts=ts, controller=controller, solver=solver, rtol=rtol, atol=atol,
                   max_steps=max_steps)
    q_ref, qd_ref, qdd_ref = jax.vmap(trajectory)(ts)
    k = jnp.asarray(gains, dtype=q0.dtype)
    qdd = qdd_ref - 2 * k[None] * (sol.qd - qd_ref) - k[None] ** 2 * (sol.q - q_ref)
    tau = jax.vmap(lambda t, q, qd: controller.torque(t, q, qd, controller.init(q, qd)))(ts, sol.q, sol.qd)
    return ShoulderTracking(ts=ts, q=sol.q, qd=sol.qd, q_ref=q_ref, qd_ref=qd_ref, qdd_ref=qdd_ref, qdd=qdd,
                            tau=tau, num_steps=sol.stats["num_steps"], drift=jnp.zeros_like(ts))
