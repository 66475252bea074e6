"""Reading an .osim model's frames and bodies (a layer of the .osim importer).

`_OsimReader` holds the file's `XmlReader` and the
frames: ``Ground``, the bodies, and every ``PhysicalOffsetFrame`` (in joints, in
bodies' ``components`` and in the ``ComponentSet``), each resolved to its base body
and its pose in that body; and it reads the ``BodySet``. The joints are read by
`._osim_joints`, the model as a whole by `._osim`.
"""

from __future__ import annotations

import dataclasses
import posixpath
import xml.etree.ElementTree as ET

import numpy as np

from .._errors import ModelError, warn
from .._model import GROUND, Body
from ._xml import REQUIRED, XmlReader

# Elements that only affect display; skipped wherever they appear.
_VISUAL = {"attached_geometry", "FrameGeometry", "Appearance", "geometry", "VisibleObject"}
_EX, _EY, _EZ = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)


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


class _OsimReader:
    """The frames and bodies of one .osim file, and the file's reader (whose getters
    the importer calls through the short methods below)."""

    def __init__(self, xml: XmlReader):
        self.xml = xml
        self.path = xml.path
        self.frames: dict[str, _Frame] = {}

    # -- messages and getters (file:line in every error) -----------------------
    def where(self, el: ET.Element) -> str:
        return self.xml.where(el)

    def fail(self, el: ET.Element, message: str, owner: ET.Element | None = None):
        self.xml.fail(el, message, owner)

    def unsupported(self, el: ET.Element, context: str = "", hint: str = ""):
        self.xml.unsupported(el, context, hint)

    def child(self, el: ET.Element, tag: str, required: bool = True) -> ET.Element | None:
        return self.xml.child(el, tag, required)

    def text(self, el: ET.Element, tag: str, default: str | None = None) -> str:
        return self.xml.text(el, tag, REQUIRED if default is None else default)

    def floats(self, el: ET.Element, tag: str, n: int | None, default=None) -> np.ndarray:
        return self.xml.floats(el, tag, n, REQUIRED if default is None else default)

    def boolean(self, el: ET.Element, tag: str, default: bool) -> bool:
        return self.xml.boolean(el, tag, default)

    def check_children(self, el: ET.Element, allowed: set[str], context: str):
        self.xml.check_children(el, allowed, context, skip=_VISUAL)

    def set_objects(self, el: ET.Element) -> list[ET.Element]:
        return self.xml.set_objects(el)

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
                for f in self.xml.children(frames):
                    self.register_frame(f, jpath)
        if sections.get("ComponentSet") is not None:
            for obj in self.set_objects(sections["ComponentSet"]):
                if obj.tag == "PhysicalOffsetFrame":
                    self.register_frame(obj, "/componentset")

    def register_components(self, owner: ET.Element, owner_path: str):
        comps = self.child(owner, "components", required=False)
        if comps is None:
            return
        for c in self.xml.children(comps):
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
        warn(f"{self.where(el)}: principal moments of inertia {moments} violate the "
             "triangle inequality I1 + I2 >= I3 (no real mass distribution has them); "
             "kept as in the file, as OpenSim does.")
        import equinox as eqx
        import jax.numpy as jnp

        body = Body(name, mass, com, np.diag(np.full(3, moments.mean())))
        return eqx.tree_at(lambda b: b.inertia, body, jnp.asarray(inertia))
