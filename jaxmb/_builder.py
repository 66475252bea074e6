"""A mutable helper that assembles a :class:`jaxmb.Model` step by step."""

import warnings
from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

from ._errors import ModelError
from ._functions import AbstractJointFunction, Constant, Coordinate
from ._model import Body, Joint, JointKind, Model
from ._typing import RealLike


class ModelBuilder:
    """Mutable helper that assembles a :class:`Model` step by step.

    ```python
    b = ModelBuilder("arm", gravity=(0, -9.81, 0))
    q = b.add_coordinate("shoulder")
    b.add_body(Body("humerus", 2.0, (0, -0.15, 0), jnp.diag(jnp.array([0.01, 0.001, 0.01]))))
    b.add_joint(revolute("shoulder", "ground", "humerus", (0, 0, 1), Coordinate(q)))
    model = b.build()
    ```
    """

    def __init__(self, name: str = "model", gravity: RealLike = (0.0, -9.81, 0.0)):
        self.name = name
        self.gravity = gravity
        self.bodies: list[Body] = []
        self.joints: list[Joint] = []
        self.coordinates: list[str] = []
        self.defaults: list[float] = []
        self.lower: list[float] = []
        self.upper: list[float] = []
        self.loads: list = []
        self.muscles: list = []

    def add_coordinate(self, name: str, default: float = 0.0,
                       range: tuple[float | int, float | int] = (-np.inf, np.inf)) -> int:
        """Add a generalized coordinate; returns its index in ``q``.

        **Arguments:**

        - `name`: unique name.
        - `default`: default value (rad or m).
        - `range`: ``(lower, upper)`` with ``lower <= upper`` (rad or m).

        **Raises:** [`jaxmb.ModelError`][jaxmb.ModelError] for a duplicate name, a range that is
        not two numbers or empty, a default that is not finite; warns (``UserWarning``) for a
        default outside the range.
        """
        if not isinstance(name, str):
            raise ModelError(f"Coordinate name must be a string, got {name!r}.")
        if name in self.coordinates:
            raise ModelError(f"Duplicate coordinate name {name!r}.")
        try:
            lower, upper = (float(x) for x in range)
        except (TypeError, ValueError):
            raise ModelError(f"Coordinate {name!r}: range must be two numbers (lower, upper), got {range!r}.") from None
        if np.isnan(lower) or np.isnan(upper) or not lower <= upper:
            raise ModelError(
                f"Coordinate {name!r}: range {tuple(range)} is empty or not a number; give "
                "(lower, upper) with lower <= upper."
            )
        if not np.isfinite(float(default)):
            raise ModelError(f"Coordinate {name!r}: default {default!r} must be finite.")
        if not lower <= float(default) <= upper:
            # A warning, not an error: the range bounds the tools (sweeps, sampling), not the
            # kinematics, and a default of 0 outside a range is a common oversight to flag.
            warnings.warn(f"Coordinate {name!r}: default {float(default):g} is outside its range [{lower:g}, "
                          f"{upper:g}]; the model's q_default starts there. Give a default inside the range.",
                          stacklevel=2)
        self.coordinates.append(name)
        self.defaults.append(float(default))
        self.lower.append(lower)
        self.upper.append(upper)
        return len(self.coordinates) - 1

    def add_body(self, body: Body) -> Body:
        """Add a :class:`jaxmb.Body`; returns it."""
        if not isinstance(body, Body):
            raise ModelError(f"ModelBuilder {self.name!r}: add_body takes a jaxmb.Body, got {type(body).__name__}; "
                             "e.g. jaxmb.Body(name, mass, com, inertia).")
        self.bodies.append(body)
        return body

    def add_joint(self, joint: Joint) -> Joint:
        """Add a :class:`jaxmb.Joint`; returns it."""
        if not isinstance(joint, Joint):
            raise ModelError(f"ModelBuilder {self.name!r}: add_joint takes a jaxmb.Joint, got {type(joint).__name__}; "
                             "e.g. jaxmb.revolute(name, parent, child, axis, function).")
        self.joints.append(joint)
        return joint

    def add_load(self, load):
        """Add an applied load (a :class:`jaxmb.AbstractLoad`, e.g. :class:`jaxmb.PointForce`)."""
        self.loads.append(load)
        return load

    def add_chain(self, name: str, parent: str, child: str,
                  axes: Sequence[tuple[JointKind, RealLike, AbstractJointFunction]],
                  offset: RealLike = (0.0, 0.0, 0.0), rotation: RealLike | None = None,
                  child_translation: RealLike = (0.0, 0.0, 0.0),
                  child_rotation: RealLike | None = None) -> list[Joint]:
        """A multi-DOF joint as a chain of 1-DOF joints through massless bodies.

        `axes` lists ``(kind, axis, function)`` in the order the motions are
        composed (each axis in the frame left by the previous motions). `offset`
        and `rotation` place the chain's first frame in `parent`;
        `child_translation`/`child_rotation` place `child` in the last frame.
        """
        if len(axes) == 0:
            raise ModelError(f"Joint {name!r}: a chain needs at least one axis (use a weld otherwise).")
        made = []
        prev = parent
        for k, (kind, axis, fn) in enumerate(axes):
            last = k == len(axes) - 1
            link = child if last else f"{name}_link{k + 1}"
            if not last:
                self.add_body(Body.virtual(link))
            j = Joint(f"{name}_{k + 1}" if len(axes) > 1 else name, prev, link, kind, axis, fn,
                      parent_translation=offset if k == 0 else (0.0, 0.0, 0.0),
                      parent_rotation=rotation if k == 0 else None,
                      child_translation=child_translation if last else (0.0, 0.0, 0.0),
                      child_rotation=child_rotation if last else None)
            made.append(self.add_joint(j))
            prev = link
        return made

    def add_weld(self, name: str, parent: str, child: str, offset: RealLike = (0.0, 0.0, 0.0),
                 rotation: RealLike | None = None) -> Joint:
        """A rigid attachment: a revolute joint locked at 0."""
        return self.add_joint(Joint(name, parent, child, "revolute", (0.0, 0.0, 1.0), Constant(0.0),
                                    parent_translation=offset, parent_rotation=rotation))

    def add_universal(self, name, parent, child, coordinates: tuple[int, int],
                      axes=((1.0, 0.0, 0.0), (0.0, 1.0, 0.0)), **kw):
        """Universal joint: rotations about two axes (the second in the rotated frame)."""
        return self.add_chain(name, parent, child,
                              [("revolute", axes[0], Coordinate(coordinates[0])),
                               ("revolute", axes[1], Coordinate(coordinates[1]))], **kw)

    def add_ball(self, name, parent, child, coordinates: tuple[int, int, int], **kw):
        """Ball joint as body-fixed X-Y-Z rotations (OpenSim's BallJoint coordinates)."""
        return self.add_chain(name, parent, child,
                              [("revolute", (1.0, 0.0, 0.0), Coordinate(coordinates[0])),
                               ("revolute", (0.0, 1.0, 0.0), Coordinate(coordinates[1])),
                               ("revolute", (0.0, 0.0, 1.0), Coordinate(coordinates[2]))], **kw)

    def add_planar(self, name, parent, child, coordinates: tuple[int, int, int], **kw):
        """Planar joint: rotation about z, then translations along x and y (OpenSim order)."""
        return self.add_chain(name, parent, child,
                              [("prismatic", (1.0, 0.0, 0.0), Coordinate(coordinates[1])),
                               ("prismatic", (0.0, 1.0, 0.0), Coordinate(coordinates[2])),
                               ("revolute", (0.0, 0.0, 1.0), Coordinate(coordinates[0]))], **kw)

    def add_free(self, name, parent, child, coordinates: tuple[int, int, int, int, int, int], **kw):
        """Free joint: translations x, y, z (parent axes) then body-fixed X-Y-Z rotations."""
        c = coordinates
        return self.add_chain(name, parent, child,
                              [("prismatic", (1.0, 0.0, 0.0), Coordinate(c[3])),
                               ("prismatic", (0.0, 1.0, 0.0), Coordinate(c[4])),
                               ("prismatic", (0.0, 0.0, 1.0), Coordinate(c[5])),
                               ("revolute", (1.0, 0.0, 0.0), Coordinate(c[0])),
                               ("revolute", (0.0, 1.0, 0.0), Coordinate(c[1])),
                               ("revolute", (0.0, 0.0, 1.0), Coordinate(c[2]))], **kw)

    def build(self) -> Model:
        return Model(self.bodies, self.joints, self.coordinates, gravity=self.gravity,
                     loads=self.loads, q_default=jnp.asarray(self.defaults, dtype=float),
                     q_lower=jnp.asarray(self.lower, dtype=float),
                     q_upper=jnp.asarray(self.upper, dtype=float),
                     muscles=self.muscles, name=self.name)
