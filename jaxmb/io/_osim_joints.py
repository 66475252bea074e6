"""Reading an .osim model's joints, coordinates and coupler constraints, and building
the jaxmb joint tree (a layer of the .osim importer, above `._osim_frames`).

A multi-axis joint becomes a chain of 1-DOF jaxmb joints through massless virtual
bodies named ``"<joint>/<axis>"``. A ``CustomJoint`` places its child at
``X_G,child = X_G,parent · X_PF · X_FM(q) · X_CM⁻¹`` with
``X_FM = [R(f1, a1) R(f2, a2) R(f3, a3), f4 a4 + f5 a5 + f6 a6]`` (translation1..3
then rotation1..3, each rotation about its axis in the frame left by the previous
ones); ``BallJoint``/``GimbalJoint``/``FreeJoint`` rotations are body-fixed X-Y-Z Euler
angles; ``FreeJoint`` and ``PlanarJoint`` translate along the parent frame's axes.
"""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET

import numpy as np

from .._errors import ModelError, warn
from .._functions import AbstractJointFunction, Constant, Coordinate, Scaled
from .._model import GROUND, Body, Joint
from ._osim_frames import _EX, _EY, _EZ, _inverse, _OsimReader
from ._osim_functions import is_function_element, is_identically_zero, parse_function

_SUPPORTED_JOINTS = ("CustomJoint", "PinJoint", "SliderJoint", "UniversalJoint", "GimbalJoint",
                     "BallJoint", "FreeJoint", "PlanarJoint", "WeldJoint")


@dataclasses.dataclass
class _Coord:
    name: str
    joint: str
    element: ET.Element
    default: float
    range: tuple[float, float]
    locked: bool
    clamped: bool


class _JointReader(_OsimReader):
    """The joints, coordinates and couplers of one .osim file, and the joint tree."""

    # -- joints and coordinates ----------------------------------------------
    def read_coordinates(self, joint: ET.Element) -> list[_Coord]:
        jname = joint.get("name")
        holder = self.child(joint, "coordinates", required=False)
        out = []
        for c in ([] if holder is None else self.xml.children(holder)):
            if c.tag != "Coordinate":
                self.unsupported(c, f"<coordinates> of {self.where(joint)}")
            self.check_children(c, {"default_value", "default_speed_value", "range", "clamped",
                                    "locked", "prescribed_function", "prescribed",
                                    "is_free_to_satisfy_constraints"}, "<Coordinate>")
            if self.boolean(c, "prescribed", False):
                self.fail(c, "prescribed coordinates (a function of time) are not supported; "
                             "set <prescribed> to false.")
            rng = self.floats(c, "range", 2, default=(-np.inf, np.inf))
            if rng[0] > rng[1]:
                self.fail(self.child(c, "range"), f"range minimum {rng[0]} exceeds maximum {rng[1]}.")
            default = float(self.floats(c, "default_value", 1, default=(0.0,))[0])
            if not rng[0] <= default <= rng[1]:  # as ModelBuilder.add_coordinate warns
                warn(f"{self.where(c)}: default_value {default:g} is outside its range [{rng[0]:g}, {rng[1]:g}]; "
                     "the model's q_default starts there, as OpenSim's does. Give a default inside the range.")
            out.append(_Coord(
                name=c.get("name"), joint=jname, element=c, default=default,
                range=(float(rng[0]), float(rng[1])),
                locked=self.boolean(c, "locked", False), clamped=self.boolean(c, "clamped", True)))
        return out

    def read_joints(self, jointset, bodies):
        coords: list[_Coord] = []
        specs = []
        seen_coords: dict[str, _Coord] = {}
        for el in self.set_objects(jointset):
            if el.tag not in _SUPPORTED_JOINTS:
                self.unsupported(el, "<JointSet>", f"supported joints: {', '.join(_SUPPORTED_JOINTS)}")
            name = el.get("name")
            if not name:
                self.fail(el, "a joint needs a name attribute.")
            allowed = {"socket_parent_frame", "socket_child_frame", "coordinates", "frames", "reverse"}
            if el.tag == "CustomJoint":
                allowed.add("SpatialTransform")
            self.check_children(el, allowed, f"<{el.tag}>")
            if self.boolean(el, "reverse", False):
                self.fail(el, "reversed joints (<reverse>true</reverse>) are not supported; swap the "
                              "parent and child frames instead.")
            jc = self.read_coordinates(el)
            for c in jc:
                if c.name in seen_coords:
                    self.fail(c.element, f"duplicate coordinate name {c.name!r}.")
                seen_coords[c.name] = c
            coords.extend(jc)
            jpath = f"/jointset/{name}"
            pref = self.child(el, "socket_parent_frame")
            cref = self.child(el, "socket_child_frame")
            parent = self.resolve(jpath, pref.text or "", pref)
            child = self.resolve(jpath, cref.text or "", cref)
            pbase, ppose = self.frame_pose(parent)
            cbase, cpose = self.frame_pose(child)
            if cbase == GROUND:
                self.fail(cref, "the child frame of a joint is fixed to ground; jaxmb needs the child "
                                "to be a body (reverse the joint's parent and child).")
            if cbase == pbase:
                self.fail(el, f"parent and child frames are both on body {cbase!r}.")
            axes = self.joint_axes(el, jc)
            specs.append(dict(element=el, name=name, parent=pbase, child=cbase, parent_pose=ppose,
                              child_pose=cpose, axes=axes))
        return coords, specs

    def joint_axes(self, el: ET.Element, jc: list[_Coord]):
        """``[(label, kind, axis, function element or None, coordinate names)]`` in composition order."""
        names = [c.name for c in jc]
        expected = {"WeldJoint": 0, "PinJoint": 1, "SliderJoint": 1, "UniversalJoint": 2,
                    "GimbalJoint": 3, "BallJoint": 3, "FreeJoint": 6, "PlanarJoint": 3}
        if el.tag in expected and len(names) != expected[el.tag]:
            self.fail(el, f"a {el.tag} has {expected[el.tag]} coordinate(s), this one lists "
                          f"{len(names)} ({names}).")
        if el.tag == "WeldJoint":
            return []
        if el.tag == "PinJoint":
            return [("rotation", "revolute", _EZ, None, [names[0]])]
        if el.tag == "SliderJoint":
            return [("translation", "prismatic", _EX, None, [names[0]])]
        if el.tag == "UniversalJoint":
            return [("rotation1", "revolute", _EX, None, [names[0]]),
                    ("rotation2", "revolute", _EY, None, [names[1]])]
        if el.tag in ("GimbalJoint", "BallJoint"):
            return [(f"rotation{k + 1}", "revolute", ax, None, [names[k]])
                    for k, ax in enumerate((_EX, _EY, _EZ))]
        if el.tag == "FreeJoint":
            return ([(f"translation{k + 1}", "prismatic", ax, None, [names[3 + k]])
                     for k, ax in enumerate((_EX, _EY, _EZ))]
                    + [(f"rotation{k + 1}", "revolute", ax, None, [names[k]])
                       for k, ax in enumerate((_EX, _EY, _EZ))])
        if el.tag == "PlanarJoint":
            return [("translation1", "prismatic", _EX, None, [names[1]]),
                    ("translation2", "prismatic", _EY, None, [names[2]]),
                    ("rotation", "revolute", _EZ, None, [names[0]])]
        return self.custom_axes(el, names)

    def custom_axes(self, el: ET.Element, names: list[str]):
        st = self.child(el, "SpatialTransform")
        self.check_children(st, {f"rotation{k}" for k in (1, 2, 3)} | {f"translation{k}" for k in (1, 2, 3)}
                            | {"TransformAxis"}, "<SpatialTransform>")
        by_label: dict[str, ET.Element] = {}
        for ta in self.xml.children(st):
            label = ta.get("name") if ta.tag == "TransformAxis" else ta.tag
            if label not in {f"rotation{k}" for k in (1, 2, 3)} | {f"translation{k}" for k in (1, 2, 3)}:
                self.fail(ta, "a TransformAxis must be named rotation1..3 or translation1..3.")
            if label in by_label:
                self.fail(ta, f"TransformAxis {label!r} given twice.")
            by_label[label] = ta
        used: list[str] = []
        axes = []
        rotation_axes, translation_axes = [], []
        for label in ("translation1", "translation2", "translation3", "rotation1", "rotation2", "rotation3"):
            ta = by_label.get(label)
            default_axis = {"1": _EX, "2": _EY, "3": _EZ}[label[-1]]
            if ta is None:  # OpenSim's default: no coordinate, Constant 0 -> no motion
                (rotation_axes if label.startswith("rotation") else translation_axes).append(default_axis)
                continue
            fn_children = [c for c in self.xml.children(ta) if c.tag not in ("coordinates", "axis")]
            for c in fn_children:
                if not is_function_element(c) and c.tag != "function":
                    self.unsupported(c, f"<TransformAxis name={label!r}>")
            axis = self.floats(ta, "axis", 3, default=default_axis)
            if np.linalg.norm(axis) < 1e-12:
                self.fail(self.child(ta, "axis"), "the axis is zero.")
            axis = axis / np.linalg.norm(axis)
            (rotation_axes if label.startswith("rotation") else translation_axes).append(axis)
            cnames = (self.text(ta, "coordinates", "")).split()
            for c in cnames:
                if c not in names:
                    self.fail(ta, f"coordinate {c!r} is not one of the joint's coordinates {names}.")
                if c not in used:
                    used.append(c)
            if len(cnames) > 1:
                self.fail(ta, f"a TransformAxis of several coordinates ({cnames}) needs a multivariate "
                              "function, which jaxmb does not support.")
            fn_el = None
            if len(fn_children) > 1:
                self.fail(fn_children[1], "a TransformAxis holds one function.")
            if fn_children:
                fn_el = fn_children[0]
                if fn_el.tag == "function":  # OpenSim 3.3 style wrapper
                    inner = self.xml.children(fn_el)
                    if len(inner) != 1:
                        self.fail(fn_el, "<function> must hold exactly one function element.")
                    fn_el = inner[0]
            kind = "revolute" if label.startswith("rotation") else "prismatic"
            axes.append((label, kind, axis, fn_el, cnames))
        unused = [n for n in names if n not in used]
        if unused:
            self.fail(el, f"coordinates {unused} are listed but drive no TransformAxis; OpenSim "
                          "requires every coordinate of a CustomJoint to be used.")
        tol = 1e-5
        for group, kind in ((rotation_axes, "rotation"), (translation_axes, "translation")):
            a = [np.asarray(v, float) / np.linalg.norm(v) for v in group]
            if (np.linalg.norm(np.cross(a[0], a[1])) < tol or np.linalg.norm(np.cross(a[0], a[2])) < tol
                    or np.linalg.norm(np.cross(a[1], a[2])) < tol):
                self.fail(st, f"collinear {kind} axes; OpenSim refuses such a CustomJoint.")
        return axes

    # -- constraints -------------------------------------------------------
    def read_constraints(self, cset, coords: list[_Coord]):
        couplers: dict[str, tuple[ET.Element, str, ET.Element, float]] = {}
        if cset is None:
            return couplers
        names = {c.name: c for c in coords}
        for el in self.set_objects(cset):
            if el.tag != "CoordinateCouplerConstraint":
                self.unsupported(el, "<ConstraintSet>", "only CoordinateCouplerConstraint is supported "
                                                        "(closed loops: use jaxmb's joint functions)")
            self.check_children(el, {"isEnforced", "isDisabled", "coupled_coordinates_function",
                                     "independent_coordinate_names", "dependent_coordinate_name",
                                     "scale_factor"}, "<CoordinateCouplerConstraint>")
            enforced = self.boolean(el, "isEnforced", True) and not self.boolean(el, "isDisabled", False)
            if not enforced:
                continue  # a disabled constraint has no effect in OpenSim either
            dep = self.text(el, "dependent_coordinate_name")
            ind = self.text(el, "independent_coordinate_names").split()
            for n in [dep] + ind:
                if n not in names:
                    self.fail(el, f"unknown coordinate {n!r}.")
            if len(ind) != 1:
                self.fail(el, f"{len(ind)} independent coordinates {ind}: OpenSim passes only the "
                              "first to the coupler function; jaxmb supports exactly one.")
            if dep in couplers:
                self.fail(el, f"coordinate {dep!r} is already the dependent coordinate of "
                              f"{self.where(couplers[dep][0])}.")
            if names[dep].locked:
                self.fail(el, f"dependent coordinate {dep!r} is also locked; unlock it or drop the "
                              "constraint.")
            holder = self.child(el, "coupled_coordinates_function")
            fns = self.xml.children(holder)
            if len(fns) != 1:
                self.fail(holder, "must hold exactly one function element.")
            scale = float(self.floats(el, "scale_factor", 1, default=(1.0,))[0])
            couplers[dep] = (el, ind[0], fns[0], scale)
        return couplers

    def coordinate_functions(self, coords: list[_Coord], couplers):
        kinds: dict[str, str] = {}
        functions: dict[str, AbstractJointFunction] = {}
        q_index = 0
        for c in coords:
            if c.name in couplers:
                kinds[c.name] = "dependent"
            elif c.locked:
                kinds[c.name] = "locked"
                functions[c.name] = Constant(c.default)
            else:
                kinds[c.name] = "independent"
                functions[c.name] = Coordinate(q_index)
                q_index += 1

        def resolve(name, stack):
            if name in functions:
                return functions[name]
            if name in stack:
                self.fail(couplers[name][0], f"coordinate couplers form a cycle: {stack + (name,)}.")
            el, ind, fn_el, scale = couplers[name]
            inner = resolve(ind, stack + (name,))
            fn = self.function(fn_el, inner)
            if scale != 1.0:
                fn = Constant(scale * float(fn.value)) if isinstance(fn, Constant) else Scaled(fn, scale)
            functions[name] = fn
            return fn

        for c in coords:
            resolve(c.name, ())
        return functions, kinds

    def function(self, el: ET.Element, inner: AbstractJointFunction) -> AbstractJointFunction:
        try:
            return parse_function(el, inner, self.xml)
        except ModelError as exc:
            msg = str(exc)
            if re.search(r" at .+:\d+: ", msg):  # already names its file and line
                raise
            raise ModelError(f"{self.where(el)}: {msg}") from None

    # -- the tree ----------------------------------------------------------
    def build_tree(self, bodies, specs, functions):
        out_bodies: list[Body] = [b for _, b in bodies.values()]
        out_joints: list[Joint] = []
        child_of: dict[str, ET.Element] = {}
        for spec in specs:
            el, name = spec["element"], spec["name"]
            parent, child = spec["parent"], spec["child"]
            if parent != GROUND and parent not in bodies:
                self.fail(el, f"parent body {parent!r} is not in the BodySet.")
            if child not in bodies:
                self.fail(el, f"child body {child!r} is not in the BodySet.")
            if child in child_of:
                self.fail(el, f"body {child!r} is already the child of {self.where(child_of[child])}; "
                              "closed kinematic loops are not supported by the .osim importer.")
            child_of[child] = el
            chain = []
            for label, kind, axis, fn_el, cnames in spec["axes"]:
                if fn_el is None:
                    if cnames:
                        fn = functions[cnames[0]]  # OpenSim's default: LinearFunction(1, 0)
                    else:
                        fn = Constant(0.0)
                elif cnames:
                    fn = self.function(fn_el, functions[cnames[0]])
                else:
                    fn = self.function(fn_el, Constant(0.0))
                    if not isinstance(fn, Constant):
                        self.fail(fn_el, f"TransformAxis {label!r} lists no coordinate, so its function "
                                         "must be a Constant (OpenSim would evaluate it without an "
                                         "argument).")
                if is_identically_zero(fn):
                    continue
                chain.append((label, kind, axis, fn))
            ppose, cpose = spec["parent_pose"], _inverse(spec["child_pose"])
            if not chain:
                chain = [("weld", "revolute", _EZ, Constant(0.0))]
            prev = parent
            for k, (label, kind, axis, fn) in enumerate(chain):
                last = k == len(chain) - 1
                link = child if last else f"{name}/{label}"
                jname = name if len(chain) == 1 else f"{name}/{label}"
                if not last:
                    out_bodies.append(Body.virtual(link))
                try:
                    out_joints.append(Joint(
                        jname, prev, link, kind, axis, fn,
                        parent_translation=ppose[:3, 3] if k == 0 else np.zeros(3),
                        parent_rotation=ppose[:3, :3] if k == 0 else None,
                        child_translation=cpose[:3, 3] if last else np.zeros(3),
                        child_rotation=cpose[:3, :3] if last else None))
                except ModelError as exc:
                    self.fail(el, str(exc))
                prev = link
        orphans = [n for n in bodies if n not in child_of]
        if orphans:
            self.fail(bodies[orphans[0]][0], f"body {orphans[0]!r} is not the child of any joint; "
                                             "connect it to its parent with a joint (e.g. a WeldJoint).")
        # Every body must reach ground.
        for n in bodies:
            seen, cur = [], n
            while cur != GROUND:
                if cur in seen:
                    self.fail(child_of[n], f"bodies {seen} form a closed loop that never reaches ground.")
                seen.append(cur)
                spec_parent = next(s["parent"] for s in specs if s["child"] == cur)
                cur = spec_parent
        return out_bodies, out_joints
