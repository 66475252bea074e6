"""Read the non-muscle elements of an OpenSim ``<ForceSet>`` into ``model.forces``.

Read (each to its [`jaxmb.AbstractForce`][jaxmb.AbstractForce] class): CoordinateActuator,
PointActuator, TorqueActuator, CoordinateLimitForce (its degrees converted to radians for
rotational coordinates, as OpenSim does), Ligament (its ``GeometryPath`` by the muscles'
path reader), PointToPointSpring, BushingForce (OpenSim 4 ``socket_frame1/2``, offset
frames in its ``<frames>``, or the 3.x ``body_1``/``location_body_1``/``orientation_body_1``
form) and ExpressionBasedCoordinateForce (expressions of
`jaxmb._forces._expression`'s grammar). A coordinate force on a coordinate that is coupled
or locked acts through its joint function of ``q``. Elements with ``appliesForce`` false
are not added (OpenSim does not apply them). Anything these elements hold that jaxmb
cannot represent raises [`jaxmb.ModelError`][jaxmb.ModelError] naming the element and its file:line.
"""

from __future__ import annotations

import numpy as np

from .._errors import ModelError
from .._forces import (BushingForce, CoordinateActuator, CoordinateLimitForce, ExpressionBasedCoordinateForce,
                       Ligament, PointActuator, PointToPointSpring, TorqueActuator)
from .._functions import Coordinate
from ._osim_forces import FORCE_ELEMENTS, _coordinate_ranges, _first, _parse_muscle, _wrap_objects
from ._osim_frames import _body_fixed_xyz, _transform
from ._osim_functions import SUPPORTED_FUNCTIONS, parse_function

_ROTATIONAL_JOINTS = ("PinJoint", "BallJoint", "GimbalJoint", "UniversalJoint", "EllipsoidJoint")


def _motion_types(reader, model_el) -> dict[str, bool]:
    """Coordinate name -> True if rotational (OpenSim's Coordinate::getMotionType)."""
    out = {}
    for joint in reader.set_objects(_first(reader.xml, model_el, "JointSet")):
        names = [c.get("name") for c in reader.xml.children(_first(reader.xml, joint, "coordinates")
                                                           or joint) if c.tag == "Coordinate"]
        if joint.tag == "CustomJoint":
            st = _first(reader.xml, joint, "SpatialTransform")
            for axis in reader.xml.children(st) if st is not None else ():
                for c in (reader.xml.text(axis, "coordinates", "") or "").split():
                    out.setdefault(c, axis.get("name", "").startswith("rotation"))
        else:
            rot = {"SliderJoint": 0, "PlanarJoint": 1, "FreeJoint": 3}.get(joint.tag, len(names))
            for i, c in enumerate(names):
                out.setdefault(c, i < rot)
    return out


def _floats_or_inf(reader, el, tag, default):
    """A number that may be ``Inf``/``-Inf`` (OpenSim's default control bounds)."""
    c = _first(reader.xml, el, tag)
    if c is None or not (c.text or "").strip():
        return default
    try:
        value = float(c.text.strip())
    except ValueError:
        reader.fail(c, f"<{tag}> must be a number, got {c.text.strip()!r}.")
    if np.isnan(value):
        reader.fail(c, f"<{tag}> must be a number or Inf/-Inf, got NaN.")
    return value


_ACTUATOR_COMMON = {"appliesForce", "isDisabled", "min_control", "max_control", "optimal_force"}
_ACTUATOR_TAGS = {"CoordinateActuator": {"coordinate"},
                  "PointActuator": {"body", "point", "point_is_global", "direction", "force_is_global"},
                  "TorqueActuator": {"bodyA", "bodyB", "axis", "torque_is_global"}}


def _name(ref: str) -> str:
    return ref.strip().split("/")[-1]


class _ForceReader:
    def __init__(self, reader, model_el, coordinate_functions, model):
        self.r, self.xml, self.model_el = reader, reader.xml, model_el
        self.functions, self.model = dict(coordinate_functions), model
        self.rotational = _motion_types(reader, model_el)
        self.bodies = ("ground",) + tuple(model.body_names)

    # -- pieces --------------------------------------------------------------
    def coordinate(self, el):
        name = _name(self.r.text(el, "coordinate", ""))
        if not name:
            self.r.fail(el, "names no <coordinate>; give the coordinate it acts on.")
        if name in self.model.coordinate_names:
            return name, None
        if name not in self.functions:
            self.r.fail(el, f"coordinate {name!r} is not a coordinate of the model.")
        return name, self.functions[name]

    def body(self, el, tag, default=None):
        ref = self.r.text(el, tag, "" if default is None else default)
        name = _name(ref) if ref else ""
        if not name:
            self.r.fail(el, f"names no <{tag}>; give the body it acts on.")
        if name not in self.bodies:
            self.r.fail(el, f"<{tag}> {ref!r} is not a body of the model (bodies: {self.bodies}).")
        return name

    def actuator_args(self, el):
        return dict(optimal_force=float(self.r.floats(el, "optimal_force", 1, (1.0,))[0]),
                    min_control=_floats_or_inf(self.r, el, "min_control", -np.inf),
                    max_control=_floats_or_inf(self.r, el, "max_control", np.inf))

    def frame(self, el, owner_path, socket):
        """(body, 4x4 pose in the body) of the frame a socket names."""
        ref = self.r.text(el, socket, "")
        if not ref:
            self.r.fail(el, f"names no <{socket}>; give the frame.")
        frame = self.r.resolve(owner_path, ref, _first(self.xml, el, socket))
        return self.r.frame_pose(frame)

    # -- elements ------------------------------------------------------------
    def read(self, el):
        tag = el.tag
        name = el.get("name") or tag
        if tag in _ACTUATOR_TAGS:  # a misspelled <optimal_force> would leave OpenSim's default of 1
            self.xml.check_children(el, _ACTUATOR_TAGS[tag] | _ACTUATOR_COMMON, f"<{tag}>")
        if tag == "CoordinateActuator":
            coord, fn = self.coordinate(el)
            return CoordinateActuator(name, coord, function=fn, **self.actuator_args(el))
        if tag == "PointActuator":
            return PointActuator(name, self.body(el, "body"), self.r.floats(el, "point", 3, (0, 0, 0)),
                                 self.r.floats(el, "direction", 3, (1, 0, 0)),
                                 point_is_global=self.r.boolean(el, "point_is_global", False),
                                 force_is_global=self.r.boolean(el, "force_is_global", False),
                                 **self.actuator_args(el))
        if tag == "TorqueActuator":
            body_a, body_b = self.body(el, "bodyA"), self.body(el, "bodyB", "ground")
            if body_a == body_b:
                self.r.fail(el, "applies its torque between a body and itself (bodyA = bodyB): it has no effect; "
                                "name the other body in <bodyB> (default: ground).")
            return TorqueActuator(name, body_a, body_b,
                                  self.r.floats(el, "axis", 3, (0, 0, 1)),
                                  torque_is_global=self.r.boolean(el, "torque_is_global", True),
                                  **self.actuator_args(el))
        if tag == "CoordinateLimitForce":
            coord, fn = self.coordinate(el)
            w = np.pi / 180.0 if self.rotational.get(coord, True) else 1.0
            v = {k: float(self.r.floats(el, k, 1, (d,))[0]) for k, d in (
                ("upper_stiffness", 1.0), ("upper_limit", 0.0), ("lower_stiffness", 1.0), ("lower_limit", 0.0),
                ("damping", 0.001), ("transition", 0.1))}
            return CoordinateLimitForce(name, coord, v["upper_stiffness"] / w, v["upper_limit"] * w,
                                        v["lower_stiffness"] / w, v["lower_limit"] * w, v["damping"] / w,
                                        v["transition"] * w, function=fn)
        if tag == "ExpressionBasedCoordinateForce":
            coord, fn = self.coordinate(el)
            return ExpressionBasedCoordinateForce(name, coord, self.r.text(el, "expression", "0.0"), function=fn)
        if tag == "PointToPointSpring":
            b1 = self.body(el, "socket_body1" if _first(self.xml, el, "socket_body1") is not None else "body1")
            b2 = self.body(el, "socket_body2" if _first(self.xml, el, "socket_body2") is not None else "body2")
            return PointToPointSpring(name, b1, self.r.floats(el, "point1", 3, (0, 0, 0)), b2,
                                      self.r.floats(el, "point2", 3, (0, 0, 0)),
                                      float(self.r.floats(el, "stiffness", 1, (1.0,))[0]),
                                      float(self.r.floats(el, "rest_length", 1, (0.0,))[0]))
        if tag == "BushingForce":
            return self.bushing(el, name)
        if tag == "Ligament":
            return self.ligament(el, name)
        raise AssertionError(tag)  # pragma: no cover (FORCE_ELEMENTS lists the tags above)

    def bushing(self, el, name):
        if _first(self.xml, el, "body_1") is not None:  # OpenSim 3.x form
            frames = []
            for i in (1, 2):
                frames.append((self.body(el, f"body_{i}"), _transform(
                    _body_fixed_xyz(self.r.floats(el, f"orientation_body_{i}", 3, (0, 0, 0))),
                    self.r.floats(el, f"location_body_{i}", 3, (0, 0, 0)))))
        else:
            path = f"/forceset/{name}"
            holder = _first(self.xml, el, "frames")
            for f in self.xml.children(holder) if holder is not None else ():
                if f"{path}/{f.get('name')}" not in self.r.frames:
                    self.r.register_frame(f, path)
            frames = [self.frame(el, path, "socket_frame1"), self.frame(el, path, "socket_frame2")]
        k = {t: self.r.floats(el, t, 3, (0, 0, 0)) for t in (
            "rotational_stiffness", "translational_stiffness", "rotational_damping", "translational_damping")}
        return BushingForce(name, frames[0][0], frames[1][0], frame1=frames[0][1], frame2=frames[1][1], **k)

    def ligament(self, el, name):
        curve = None
        for c in self.xml.children(el):
            if c.tag in SUPPORTED_FUNCTIONS and c.get("name", "force_length_curve") == "force_length_curve":
                curve = c
            elif c.tag == "force_length_curve":
                inner = self.xml.children(c)
                curve = inner[0] if inner else None
        if curve is None:
            self.r.fail(el, "has no force_length_curve (a function element such as <SimmSpline "
                            "name=\"force_length_curve\">) jaxmb can read; supported functions: "
                            f"{SUPPORTED_FUNCTIONS}.")
        fl = parse_function(curve, Coordinate(0), self.xml)
        path = _parse_muscle(self.xml, el, self.functions, self.model.body_names,
                             _wrap_objects(self.xml, self.model_el), _coordinate_ranges(self.xml, self.model_el))
        return Ligament(name, path, fl, float(self.r.floats(el, "resting_length", 1)[0]),
                        float(self.r.floats(el, "pcsa_force", 1)[0]))


def parse_force_elements(reader, model_el, coordinate_functions, model) -> tuple:
    """The ForceSet's elements of `FORCE_ELEMENTS` types as jaxmb forces, in file order.

    **Arguments:**

    - `reader`: the importer (its XML reader and frames; errors name file and line).
    - `model_el`: the ``<Model>`` element.
    - `coordinate_functions`: every OpenSim coordinate name -> its joint function of q.
    - `model`: the skeleton (its bodies and independent coordinates).

    **Returns:** a tuple of [`jaxmb.AbstractForce`][jaxmb.AbstractForce].
    """
    forceset = _first(reader.xml, model_el, "ForceSet")
    if forceset is None:
        return ()
    fr = _ForceReader(reader, model_el, coordinate_functions, model)
    out = []
    for el in reader.set_objects(forceset):
        if el.tag not in FORCE_ELEMENTS:
            continue
        if not reader.boolean(el, "appliesForce", True) or reader.boolean(el, "isDisabled", False):
            continue
        try:
            out.append(fr.read(el))
        except ModelError as exc:
            if str(reader.xml.path) in str(exc):  # already names the element and file:line
                raise
            reader.fail(el, str(exc))
    return tuple(out)
