"""Load OpenSim 4.x ``.osim`` models (the skeleton) into a :class:`jaxmb.Model`.

What is read (see ``docs/osim_import.md`` for the full list and the reasons):

* ``Ground``, ``BodySet`` (mass, centre of mass, inertia ``[Ixx Iyy Izz Ixy Ixz Iyz]``
  about the centre of mass in body axes), ``PhysicalOffsetFrame`` s (in joints,
  in bodies' ``components`` and in the ``ComponentSet``), ``gravity``.
* ``JointSet``: ``CustomJoint`` (``SpatialTransform`` of six ``TransformAxis``),
  ``PinJoint``, ``SliderJoint``, ``UniversalJoint``, ``GimbalJoint``,
  ``BallJoint``, ``FreeJoint``, ``PlanarJoint``, ``WeldJoint``. A multi-axis joint
  becomes a chain of 1-DOF jaxmb joints through massless virtual bodies named
  ``"<joint>/<axis>"`` (OpenSim names cannot contain ``/``, so they never clash).
* Coordinates: default value, range, locked, clamped. ``CoordinateCouplerConstraint``
  makes its dependent coordinate a joint function of the independent one; locked
  coordinates are held at their default value. Both are eliminated from ``q``,
  which holds the independent, unlocked coordinates in file order.
* The ``ForceSet`` is handed to ``jaxmb.io._osim_forces.parse_muscles`` when that
  module exists.

Anything else raises :class:`jaxmb.ModelError` naming the element, its ``name``
and its file and line. Only elements that cannot change the dynamics are ignored:
visual geometry (``attached_geometry``, ``FrameGeometry``, ``Appearance``),
``MarkerSet``, ``ProbeSet``, credits/publications, and disabled
(``isEnforced`` false) couplers.

OpenSim semantics reproduced (opensim-core 4.x, Simbody):

* A joint places its child body at ``X_G,child = X_G,parent · X_PF · X_FM(q) · X_CM⁻¹``
  with ``X_PF`` the parent frame in the parent body and ``X_CM`` the child frame in
  the child body.
* ``CustomJoint``: ``X_FM = [R, p]`` with ``R = R(f1, a1) R(f2, a2) R(f3, a3)``
  (each rotation about its unit axis in the frame left by the previous ones) and
  ``p = f4 a4 + f5 a5 + f6 a6`` in the parent frame F, ``f_i`` the TransformAxis
  functions of the coordinates; so the chain is translation1..3 then rotation1..3.
* ``BallJoint``/``GimbalJoint``/``FreeJoint`` rotations are body-fixed X-Y-Z Euler
  angles (OpenSim switches Simbody to Euler angles); ``FreeJoint`` and
  ``PlanarJoint`` translate along the parent frame's axes.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import posixpath
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any
from xml.parsers import expat

import numpy as np

from .._errors import ModelError
from .._functions import AbstractJointFunction, Constant, Coordinate, Scaled
from .._model import GROUND, Body, Joint, Model
from ._osim_functions import is_function_element, is_identically_zero, parse_function

__all__ = ["OsimCoordinate", "OsimImport", "load_osim", "read_osim"]

# Elements that only affect display; skipped wherever they appear.
_VISUAL = {"attached_geometry", "FrameGeometry", "Appearance", "geometry", "VisibleObject"}
# Model-level elements with no effect on the dynamics.
_MODEL_INFO = {"credits", "publications", "length_units", "force_units", "defaults",
               "assembly_accuracy"}
_SUPPORTED_JOINTS = ("CustomJoint", "PinJoint", "SliderJoint", "UniversalJoint", "GimbalJoint",
                     "BallJoint", "FreeJoint", "PlanarJoint", "WeldJoint")
_EX, _EY, _EZ = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)


# ---------------------------------------------------------------------------
# Public results
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class OsimCoordinate:
    """One OpenSim coordinate, as read from the file.

    `kind` is ``"independent"`` (in ``q``), ``"dependent"`` (coupled: a function of
    independent coordinates) or ``"locked"`` (held at `default`). `function` is its
    value as a jaxmb joint function of ``q``.
    """

    name: str
    joint: str
    default: float
    range: tuple[float, float]
    locked: bool
    clamped: bool
    kind: str
    function: AbstractJointFunction


@dataclasses.dataclass(frozen=True)
class OsimImport:
    """Everything :func:`read_osim` extracts: the model and the coordinate bookkeeping."""

    model: Model
    coordinates: tuple[OsimCoordinate, ...]
    source: str

    @property
    def coordinate_functions(self) -> dict[str, AbstractJointFunction]:
        """Every OpenSim coordinate name -> its jaxmb joint function of ``q``."""
        return {c.name: c.function for c in self.coordinates}

    @property
    def all_coordinate_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.coordinates)

    def names_of(self, kind: str) -> tuple[str, ...]:
        return tuple(c.name for c in self.coordinates if c.kind == kind)

    def full_coordinates(self, q):
        """Values of every OpenSim coordinate (file order) at the independent ``q``."""
        import jax.numpy as jnp

        q = jnp.asarray(q)
        return jnp.stack([jnp.asarray(c.function(q), dtype=q.dtype) for c in self.coordinates])


def load_osim(path: str | os.PathLike) -> Model:
    """A :class:`jaxmb.Model` from an OpenSim 4.x ``.osim`` file.

    ``model.coordinate_names`` are the independent, unlocked OpenSim coordinates in
    file order; coupled (dependent) and locked coordinates are eliminated into the
    joint functions. ``model.body_names`` holds every OpenSim body (plus massless
    ``"<joint>/<axis>"`` links of multi-axis joints). ``q_default``, ``q_lower`` and
    ``q_upper`` are the coordinates' ``default_value`` and ``range``.

    Raises :class:`jaxmb.ModelError` naming the element, its name and its line for
    anything the importer does not support. See :func:`read_osim` for the
    coordinate bookkeeping.
    """
    return read_osim(path).model


def read_osim(path: str | os.PathLike, *, muscles: bool = True) -> OsimImport:
    """Like :func:`load_osim`, also returning every coordinate's joint function and kind.

    With ``muscles=False`` the ForceSet is not read (the skeleton alone).
    """
    return _Importer(os.fspath(path), muscles=muscles).run()


# ---------------------------------------------------------------------------
# XML with line numbers
# ---------------------------------------------------------------------------


def _parse_with_lines(path: str) -> tuple[ET.Element, dict[ET.Element, int]]:
    """Parse with expat into an ElementTree, recording each element's start line."""
    builder = ET.TreeBuilder()
    lines: dict[ET.Element, int] = {}
    parser = expat.ParserCreate()
    parser.buffer_text = True

    def start(tag, attrs):
        lines[builder.start(tag, attrs)] = parser.CurrentLineNumber

    parser.StartElementHandler = start
    parser.EndElementHandler = builder.end
    parser.CharacterDataHandler = builder.data
    try:
        with open(path, "rb") as fh:
            parser.ParseFile(fh)
    except expat.ExpatError as exc:
        raise ModelError(f"{path}: not well-formed XML ({exc}); is this an .osim file?") from None
    except OSError as exc:
        raise ModelError(f"{path}: cannot read the file ({exc}).") from None
    return builder.close(), lines


def _children(el: ET.Element) -> list[ET.Element]:
    return [c for c in el if isinstance(c.tag, str)]


def _rotation(axis, angle) -> np.ndarray:
    a = np.asarray(axis, float)
    a = a / np.linalg.norm(a)
    k = np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])
    return np.eye(3) + np.sin(angle) * k + (1.0 - np.cos(angle)) * (k @ k)


def _body_fixed_xyz(angles) -> np.ndarray:
    return _rotation(_EX, angles[0]) @ _rotation(_EY, angles[1]) @ _rotation(_EZ, angles[2])


def _transform(rotation, translation) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3] = rotation
    t[:3, 3] = translation
    return t


def _inverse(t: np.ndarray) -> np.ndarray:
    r = t[:3, :3]
    return _transform(r.T, -r.T @ t[:3, 3])


@dataclasses.dataclass
class _Frame:
    path: str
    element: ET.Element
    base: str | None = None  # body name (or GROUND) once resolved
    pose: np.ndarray | None = None  # frame in its base body


@dataclasses.dataclass
class _Coord:
    name: str
    joint: str
    element: ET.Element
    default: float
    range: tuple[float, float]
    locked: bool
    clamped: bool


# ---------------------------------------------------------------------------
# The importer
# ---------------------------------------------------------------------------


class _Importer:
    def __init__(self, path: str, muscles: bool = True):
        self.path = path
        self.read_muscles = muscles
        self.root, self.lines = _parse_with_lines(path)
        self.frames: dict[str, _Frame] = {}

    # -- messages ----------------------------------------------------------
    def where(self, el: ET.Element) -> str:
        name = el.get("name")
        label = f"<{el.tag}{f' name={name!r}' if name is not None else ''}>"
        return f"{label} at {self.path}:{self.lines.get(el, '?')}"

    def fail(self, el: ET.Element, message: str):
        raise ModelError(f"{self.where(el)}: {message}")

    def unsupported(self, el: ET.Element, context: str = "", hint: str = ""):
        ctx = f" in {context}" if context else ""
        self.fail(el, f"element {el.tag!r}{ctx} is not supported by jaxmb's .osim importer"
                      f"{'; ' + hint if hint else ''}.")

    # -- small readers -----------------------------------------------------
    def child(self, el: ET.Element, tag: str, required: bool = True) -> ET.Element | None:
        found = [c for c in _children(el) if c.tag == tag]
        if len(found) > 1:
            self.fail(found[1], f"<{tag}> appears more than once.")
        if not found:
            if required:
                self.fail(el, f"missing required <{tag}>.")
            return None
        return found[0]

    def text(self, el: ET.Element, tag: str, default: str | None = None) -> str:
        c = self.child(el, tag, required=default is None)
        if c is None:
            return default
        return (c.text or "").strip()

    def floats(self, el: ET.Element, tag: str, n: int | None, default=None) -> np.ndarray:
        c = self.child(el, tag, required=default is None)
        if c is None:
            return np.asarray(default, dtype=float)
        try:
            v = np.array([float(t) for t in (c.text or "").split()], dtype=float)
        except ValueError:
            self.fail(c, f"expected numbers, got {(c.text or '').strip()!r}.")
        if n is not None and v.size != n:
            self.fail(c, f"expected {n} numbers, got {v.size} ({(c.text or '').strip()!r}).")
        if not np.all(np.isfinite(v)):
            self.fail(c, f"holds a non-finite number ({(c.text or '').strip()!r}).")
        return v

    def boolean(self, el: ET.Element, tag: str, default: bool) -> bool:
        t = self.text(el, tag, "true" if default else "false").lower()
        if t not in ("true", "false", "1", "0"):
            self.fail(self.child(el, tag), f"expected true or false, got {t!r}.")
        return t in ("true", "1")

    def check_children(self, el: ET.Element, allowed: set[str], context: str):
        for c in _children(el):
            if c.tag in _VISUAL:
                continue
            if c.tag not in allowed:
                self.unsupported(c, context)

    def set_objects(self, el: ET.Element) -> list[ET.Element]:
        """The components of an OpenSim Set (``<XSet><objects>...</objects><groups/>``)."""
        for c in _children(el):
            if c.tag not in ("objects", "groups"):
                self.unsupported(c, f"<{el.tag}>")
        objs = self.child(el, "objects", required=False)
        return [] if objs is None else _children(objs)

    # -- run ---------------------------------------------------------------
    def run(self) -> OsimImport:
        doc = self.root
        if doc.tag != "OpenSimDocument":
            self.fail(doc, "the root element must be <OpenSimDocument>; this is not an .osim model.")
        version = doc.get("Version")
        try:
            version_number = int(version)
        except (TypeError, ValueError):
            self.fail(doc, f"missing or invalid Version attribute {version!r}.")
        if version_number < 40000:
            self.fail(doc, f"Version {version_number} is an OpenSim 3.x file; jaxmb reads OpenSim "
                           "4.x files: open it in OpenSim 4 and save it again.")
        models = _children(doc)
        if len(models) != 1 or models[0].tag != "Model":
            bad = next((m for m in models if m.tag != "Model"), models[1] if len(models) > 1 else doc)
            self.fail(bad, "an .osim document must hold exactly one <Model>.")
        model_el = models[0]
        sections = self.read_model_sections(model_el)
        self.register_frames(sections)
        bodies = self.read_bodies(sections.get("BodySet"))
        coords, joint_specs = self.read_joints(sections.get("JointSet"), bodies)
        couplers = self.read_constraints(sections.get("ConstraintSet"), coords)
        self.check_empty(sections, "ContactGeometrySet", "contact geometry (and the forces "
                                                         "that use it) is not supported")
        self.check_empty(sections, "ControllerSet", "controllers are not supported; apply "
                                                    "controls through jaxmb instead")
        self.check_component_set(sections.get("ComponentSet"))

        functions, kinds = self.coordinate_functions(coords, couplers)
        independent = [c for c in coords if kinds[c.name] == "independent"]
        jaxmb_bodies, jaxmb_joints = self.build_tree(bodies, joint_specs, functions)
        gravity = (self.floats(model_el, "gravity", 3, default=(0.0, -9.80665, 0.0)))
        try:
            model = Model(
                jaxmb_bodies, jaxmb_joints, [c.name for c in independent], gravity=gravity,
                q_default=np.array([c.default for c in independent], dtype=float),
                q_lower=np.array([c.range[0] for c in independent], dtype=float),
                q_upper=np.array([c.range[1] for c in independent], dtype=float),
                name=model_el.get("name") or os.path.basename(self.path),
            )
        except ModelError as exc:
            raise ModelError(f"{self.where(model_el)}: {exc}") from None
        # Muscles index bodies in the model's (parents-first) order, known only now.
        muscles = self.muscles(model_el, sections, functions, model.body_names)
        if muscles:
            model = Model(model.bodies, model.joints, model.coordinate_names, gravity=model.gravity,
                          q_default=model.q_default, q_lower=model.q_lower, q_upper=model.q_upper,
                          muscles=muscles, name=model.name)
        coordinates = tuple(
            OsimCoordinate(c.name, c.joint, c.default, c.range, c.locked, c.clamped,
                           kinds[c.name], functions[c.name]) for c in coords)
        return OsimImport(model=model, coordinates=coordinates, source=self.path)

    # -- model sections ----------------------------------------------------
    def read_model_sections(self, model_el: ET.Element) -> dict[str, ET.Element]:
        sets = {"BodySet", "JointSet", "ConstraintSet", "ForceSet", "MarkerSet",
                "ContactGeometrySet", "ControllerSet", "ProbeSet", "ComponentSet"}
        sections: dict[str, ET.Element] = {}
        for c in _children(model_el):
            if c.tag in sets or c.tag == "Ground":
                if c.tag in sections:
                    self.fail(c, f"<{c.tag}> appears twice in the model.")
                sections[c.tag] = c
            elif c.tag in ("gravity",) or c.tag in _MODEL_INFO or c.tag in _VISUAL:
                continue
            elif c.tag == "WrapObjectSet":
                continue  # wrap surfaces belong to the muscle paths (parse_muscles)
            else:
                self.unsupported(c, "<Model>")
        for tag, expected in (("length_units", "meters"), ("force_units", "N")):
            unit = self.text(model_el, tag, expected)
            if unit.lower() not in (expected.lower(), "m" if tag == "length_units" else "newtons"):
                self.fail(self.child(model_el, tag), f"jaxmb works in SI units; {tag} "
                                                     f"{unit!r} is not supported (use {expected}).")
        if "BodySet" not in sections:
            self.fail(model_el, "the model has no <BodySet>.")
        if "JointSet" not in sections:
            self.fail(model_el, "the model has no <JointSet>.")
        return sections

    def check_empty(self, sections, tag, reason):
        el = sections.get(tag)
        if el is None:
            return
        objs = self.set_objects(el)
        if objs:
            self.fail(objs[0], f"{reason} (jaxmb's .osim importer supports only an empty <{tag}>).")

    def check_component_set(self, el):
        if el is None:
            return
        for obj in self.set_objects(el):
            if obj.tag != "PhysicalOffsetFrame":
                self.unsupported(obj, "<ComponentSet>", "only PhysicalOffsetFrame components are read")

    # -- frames ------------------------------------------------------------
    def register_frames(self, sections):
        ground = sections.get("Ground")
        gname = ground.get("name", "ground") if ground is not None else "ground"
        if gname != "ground":
            self.fail(ground, "the Ground must be named 'ground'.")
        if ground is not None:
            self.check_children(ground, {"WrapObjectSet", "components"}, "<Ground>")
        self.frames["/ground"] = _Frame("/ground", ground if ground is not None else ET.Element("Ground"),
                                        GROUND, np.eye(4))
        if ground is not None:
            self.register_components(ground, "/ground")
        for body in self.set_objects(sections["BodySet"]):
            name = body.get("name")
            if not name:
                self.fail(body, "a body needs a name attribute.")
            path = f"/bodyset/{name}"
            if path in self.frames:
                self.fail(body, f"duplicate body name {name!r}.")
            self.frames[path] = _Frame(path, body, name, np.eye(4))
            self.register_components(body, path)
        for joint in self.set_objects(sections["JointSet"]):
            jpath = f"/jointset/{joint.get('name')}"
            frames = self.child(joint, "frames", required=False)
            if frames is not None:
                for f in _children(frames):
                    self.register_frame(f, jpath)
        if sections.get("ComponentSet") is not None:
            for obj in self.set_objects(sections["ComponentSet"]):
                if obj.tag == "PhysicalOffsetFrame":
                    self.register_frame(obj, "/componentset")

    def register_components(self, owner: ET.Element, owner_path: str):
        comps = self.child(owner, "components", required=False)
        if comps is None:
            return
        for c in _children(comps):
            if c.tag != "PhysicalOffsetFrame":
                self.unsupported(c, f"<components> of {self.where(owner)}",
                                 "only PhysicalOffsetFrame components are read")
            self.register_frame(c, owner_path)

    def register_frame(self, el: ET.Element, owner_path: str):
        if el.tag != "PhysicalOffsetFrame":
            self.unsupported(el, "a frame list", "only PhysicalOffsetFrame is supported")
        name = el.get("name")
        if not name:
            self.fail(el, "a frame needs a name attribute.")
        path = f"{owner_path}/{name}"
        if path in self.frames:
            self.fail(el, f"duplicate frame path {path!r}.")
        self.check_children(el, {"socket_parent", "translation", "orientation", "WrapObjectSet",
                                 "components"}, "<PhysicalOffsetFrame>")
        self.frames[path] = _Frame(path, el)
        self.register_components(el, path)

    def resolve(self, owner_path: str, ref: str, el: ET.Element) -> _Frame:
        """The frame named by the socket path `ref` (relative to `owner_path`)."""
        ref = ref.strip()
        if not ref:
            self.fail(el, "empty frame reference.")
        path = posixpath.normpath(ref if ref.startswith("/") else f"{owner_path}/{ref}")
        frame = self.frames.get(path)
        if frame is None:
            self.fail(el, f"frame {ref!r} (resolved to {path!r}) does not exist; known frames: "
                          f"{sorted(self.frames)}.")
        return frame

    def frame_pose(self, frame: _Frame, stack: tuple[str, ...] = ()) -> tuple[str, np.ndarray]:
        """(base body, pose of the frame in that body)."""
        if frame.base is not None:
            return frame.base, frame.pose
        if frame.path in stack:
            self.fail(frame.element, f"frames reference each other in a cycle: {stack + (frame.path,)}.")
        el = frame.element
        # A socket path is relative to the component that owns the socket (the frame).
        parent = self.resolve(frame.path, self.text(el, "socket_parent"), self.child(el, "socket_parent"))
        base, parent_pose = self.frame_pose(parent, stack + (frame.path,))
        local = _transform(_body_fixed_xyz(self.floats(el, "orientation", 3, default=(0, 0, 0))),
                           self.floats(el, "translation", 3, default=(0, 0, 0)))
        frame.base, frame.pose = base, parent_pose @ local
        return frame.base, frame.pose

    # -- bodies ------------------------------------------------------------
    def read_bodies(self, bodyset: ET.Element) -> dict[str, tuple[ET.Element, Body]]:
        out: dict[str, tuple[ET.Element, Body]] = {}
        for el in self.set_objects(bodyset):
            if el.tag != "Body":
                self.unsupported(el, "<BodySet>")
            self.check_children(el, {"mass", "mass_center", "inertia", "WrapObjectSet", "components"},
                                "<Body>")
            name = el.get("name")
            mass = float(self.floats(el, "mass", 1, default=(0.0,))[0])
            com = self.floats(el, "mass_center", 3, default=(0.0, 0.0, 0.0))
            i6 = self.floats(el, "inertia", 6, default=(0.0,) * 6)
            ixx, iyy, izz, ixy, ixz, iyz = i6
            inertia = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
            if mass == 0.0 and np.any(inertia):
                self.fail(el, "has zero mass but non-zero inertia; jaxmb needs a positive mass "
                              "(or zero mass and zero inertia for a massless body).")
            try:
                if mass == 0.0:
                    body = Body(name, 0.0, com, massless=True)
                else:
                    body = Body(name, mass, com, inertia)
            except ModelError as exc:
                body = self.physically_impossible_inertia(el, name, mass, com, inertia, exc)
            out[name] = (el, body)
        return out

    def physically_impossible_inertia(self, el, name, mass, com, inertia, exc):
        """Keep an inertia that OpenSim accepts but jaxmb's Body validation rejects.

        Some published models (MoBL-ARMS' clavicle) have principal moments that violate
        the triangle inequality. OpenSim/Simbody simulate them as given, so the
        importer keeps the file's numbers (parity first) and warns; any other problem
        (asymmetric, indefinite, non-finite) is an error.
        """
        moments = np.linalg.eigvalsh(inertia)
        scale = max(float(np.max(np.abs(inertia))), 1e-300)
        if not (mass > 0 and np.all(np.isfinite(inertia)) and np.all(np.isfinite(com))
                and moments[0] >= -1e-9 * scale and "triangle inequality" in str(exc)):
            self.fail(el, str(exc))
        warnings.warn(f"{self.where(el)}: principal moments of inertia {moments} violate the "
                      "triangle inequality I1 + I2 >= I3 (no real mass distribution has them); "
                      "kept as in the file, as OpenSim does.", stacklevel=5)
        import equinox as eqx
        import jax.numpy as jnp

        body = Body(name, mass, com, np.diag(np.full(3, moments.mean())))
        return eqx.tree_at(lambda b: b.inertia, body, jnp.asarray(inertia))

    # -- joints and coordinates ----------------------------------------------
    def read_coordinates(self, joint: ET.Element) -> list[_Coord]:
        jname = joint.get("name")
        holder = self.child(joint, "coordinates", required=False)
        out = []
        for c in ([] if holder is None else _children(holder)):
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
            out.append(_Coord(
                name=c.get("name"), joint=jname, element=c,
                default=float(self.floats(c, "default_value", 1, default=(0.0,))[0]),
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
        for ta in _children(st):
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
            fn_children = [c for c in _children(ta) if c.tag not in ("coordinates", "axis")]
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
                    inner = _children(fn_el)
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
            fns = _children(holder)
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
            return parse_function(el, inner, describe=self.where)
        except ModelError as exc:
            msg = str(exc)
            if " at " + self.path in msg:
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

    # -- muscles -----------------------------------------------------------
    def muscles(self, model_el, sections, functions, body_names) -> Sequence[Any]:
        forceset = sections.get("ForceSet")
        if not self.read_muscles:
            return ()
        try:
            forces = importlib.import_module("jaxmb.io._osim_forces")
        except ModuleNotFoundError as exc:
            if exc.name != "jaxmb.io._osim_forces":
                raise
            if forceset is not None and self.set_objects(forceset):
                warnings.warn(f"{self.path}: the ForceSet was not read (jaxmb.io._osim_forces is not "
                              "available); the model has no muscles.", stacklevel=3)
            return ()
        return tuple(forces.parse_muscles(model_el, dict(functions), tuple(body_names), self.path))
