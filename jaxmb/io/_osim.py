"""Load OpenSim 4.x ``.osim`` models (the skeleton) into a [`jaxmb.Model`][jaxmb.Model].

What is read (see the how-to on importing OpenSim models for the reasons):

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
* The ``ForceSet`` (its muscles and their paths) is read by
  `jaxmb.io._osim_forces.parse_muscles`. An element with a ``file`` attribute
  (``<ForceSet file="muscles.xml"/>``) is read from that file, relative to the
  folder of the file that names it, as OpenSim does.

Anything else raises [`jaxmb.ModelError`][jaxmb.ModelError] naming the element, its ``name``
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
import os
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import numpy as np

from .._errors import ModelError, warn
from .._forces import Ligament
from .._functions import AbstractJointFunction
from .._model import Model
from .._model_checks import is_kinematic
from .._muscles import check_path_force_route, Muscle
from .._muscles._geometry import WRAP_GEOMETRIES, with_wrap_geometry
from ._osim_actuators import parse_force_elements
from ._osim_forces import parse_function_path_set, parse_muscles, parse_paths
from ._osim_frames import _VISUAL
from ._osim_joints import _JointReader
from ._xml import XmlReader

__all__ = ["OsimCoordinate", "OsimImport", "load_osim", "read_osim", "read_ligaments"]

# Model-level elements with no effect on the dynamics.
_MODEL_INFO = {"credits", "publications", "length_units", "force_units", "defaults",
               "assembly_accuracy"}

# ---------------------------------------------------------------------------
# Public results
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class OsimCoordinate:
    """One OpenSim coordinate, as read from the file.

    - `name`, `joint`: the coordinate's and its joint's OpenSim names.
    - `default`: ``default_value`` (rad, or m for a translation).
    - `range`: ``(lower, upper)``, same units.
    - `locked`, `clamped`: OpenSim's flags.
    - `kind`: ``"independent"`` (in ``q``), ``"dependent"`` (coupled: a function of
      independent coordinates, ``CoordinateCouplerConstraint``) or ``"locked"``
      (held at `default`).
    - `function`: its value as a jaxmb joint function of ``q``.
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
    """Everything `read_osim` extracts: the model and the coordinate bookkeeping.

    - `model`: the [`jaxmb.Model`][jaxmb.Model] (`load_osim`'s).
    - `coordinates`: one `OsimCoordinate` per OpenSim coordinate, in file order.
    - `source`: the path read.
    """

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
        """Values of every OpenSim coordinate (file order) at the independent ``q`` (nq,):
        (n_coordinates,), rad or m."""
        import jax.numpy as jnp

        q = jnp.asarray(q)
        return jnp.stack([jnp.asarray(c.function(q), dtype=q.dtype) for c in self.coordinates])


def load_osim(path: str | os.PathLike, *, wrap_geometry: str = "converged",
              ligament_moment_arms: str = "closed_form", function_paths: str | os.PathLike | None = None) -> Model:
    """A [`jaxmb.Model`][jaxmb.Model] from an OpenSim 4.x ``.osim`` file.

    ``model.coordinate_names`` are the independent, unlocked OpenSim coordinates in
    file order; coupled (dependent) and locked coordinates are eliminated into the
    joint functions. ``model.body_names`` holds every OpenSim body (plus massless
    ``"<joint>/<axis>"`` links of multi-axis joints). ``q_default``, ``q_lower`` and
    ``q_upper`` are the coordinates' ``default_value`` and ``range``.

    The skeleton follows OpenSim's semantics (Delp et al. 2007; opensim-core 4.x):
    a joint places its child at ``X_G,child = X_G,parent · X_PF · X_FM(q) · X_CM⁻¹``
    (CustomJoint, PinJoint, SliderJoint, Universal, Gimbal, Ball, Free, Planar
    and Weld joints), in SI units (m, kg, kg m², rad).
    The ForceSet's muscles become `model.muscles`, its actuators, springs, limit forces,
    bushings and ligaments `model.forces` (see `jaxmb.io._osim_actuators`).

    **Arguments:**

    - `path`: the ``.osim`` file.
    - `wrap_geometry`: ``"converged"`` (default): on muscles with several PathWraps the
      cylinders (and tori) slide their tangent points to the point OpenSim's restarts
      converge to, in closed form (`WrapCylinder`'s ``sliding="geodesic"``): no loop, so
      faster to evaluate and to compile, and within tenths of a millimetre of OpenSim
      where OpenSim's restarts stop short (docs/opensim-parity.md, "Converged
      wrap geometry", per wrap kind). ``"opensim"``: the wrap objects reproduce OpenSim
      4.6's iterates, so lengths and moment arms match OpenSim's to round-off (use it to
      compare with OpenSim's own output).
    - `ligament_moment_arms`: how the ForceSet's Ligaments turn their tension into
      generalized forces ([`jaxmb.Ligament`][jaxmb.Ligament]'s `moment_arms`):
      ``"closed_form"`` (default, ``R = -dL/dq``, a conservative element) or
      ``"frozen_path"`` (OpenSim's force: the path frozen at q).
    - `function_paths`: an OpenSim path set file (``<Set_FunctionBasedPath_>``: what
      OpenSim's ``PolynomialPathFitter``, `jaxmb.io.write_function_paths` and
      ``jaxmb fit-paths`` write) whose paths replace the points and wraps of the muscles
      and ligaments they name, as OpenSim's ``ModOpReplacePathsWithFunctionBasedPaths``
      does; those it does not name keep their paths. None (default): the file's paths.

    **Returns:**

    The [`jaxmb.Model`][jaxmb.Model].

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] naming the element, its name and its file and line for
    anything the importer does not support or a value that is not finite. See
    `read_osim` for the coordinate bookkeeping.
    """
    return read_osim(path, wrap_geometry=wrap_geometry, ligament_moment_arms=ligament_moment_arms,
                     function_paths=function_paths).model


def read_osim(path: str | os.PathLike, *, muscles: bool | Sequence[str] = True,
              locked: dict[str, float] | None = None, wrap_geometry: str = "converged",
              ligament_moment_arms: str = "closed_form", function_paths: str | os.PathLike | None = None
              ) -> OsimImport:
    """Like `load_osim`, also returning every coordinate's joint function and kind.

    **Arguments:**

    - `path`: the ``.osim`` file.
    - `muscles`: read the ForceSet's muscles; with ``False`` the skeleton alone; a sequence
      of muscle names reads only those (in file order; the other force elements are read as
      with ``True``): a model of a few muscles compiles far faster than one of all of them.
    - `locked`: ``{coordinate name: value}`` (rad or m): coordinates to hold at these
      values as if the file locked them with that ``default_value`` (OpenSim's
      ``Coordinate.setLocked``); they leave ``q`` and their couplers' dependents become
      constants. A name that is not an independent coordinate of the file raises.
    - `wrap_geometry`, `ligament_moment_arms`, `function_paths`: as for `load_osim` (with
      a list of `muscles`, the path set's paths of the other muscles are not read).

    **Returns:**

    An `OsimImport`: the `model`, one `OsimCoordinate` per OpenSim coordinate in
    file order (independent, dependent or locked) and the `source` path.

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError], as `load_osim`.
    """
    if wrap_geometry not in WRAP_GEOMETRIES:
        raise ValueError(f"{os.fspath(path)}: wrap_geometry must be one of "
                         f"{', '.join(map(repr, WRAP_GEOMETRIES))}, got {wrap_geometry!r}.")
    check_path_force_route(os.fspath(path), "ligament_moment_arms", ligament_moment_arms)
    imp = _Importer(os.fspath(path), muscles=muscles, locked=locked).run()
    model = imp.model
    if function_paths is not None:
        model = _with_function_paths(model, os.fspath(function_paths), imp.coordinate_functions,
                                     every_muscle=muscles is True)
    if wrap_geometry != "opensim":  # the importer builds OpenSim's
        model = with_wrap_geometry(model, wrap_geometry)
    if ligament_moment_arms != "closed_form":  # the importer's default
        model = eqx.tree_at(lambda m: m.forces, model, tuple(
            f.with_moment_arms(ligament_moment_arms) if isinstance(f, Ligament) else f for f in model.forces))
    return dataclasses.replace(imp, model=model)


def _with_function_paths(model: Model, path: str, coordinate_functions, every_muscle: bool) -> Model:
    """`model` with the muscles and ligaments named in the path set `path` taking its paths."""
    xml, paths = parse_function_path_set(path, coordinate_functions)
    names = [m.name for m in model.muscles]
    ligaments = [f.name for f in model.forces if isinstance(f, Ligament)]
    for name, (el, _) in paths.items():
        if name not in names and name not in ligaments and every_muscle:
            xml.fail(el, f"the path set names force {name!r}, which is not a muscle or ligament of the model (its "
                         f"muscles are {names}, its ligaments {ligaments}).")
    muscles = tuple(m.with_path(paths[m.name][1]) if m.name in paths else m for m in model.muscles)
    forces = tuple(f.with_path(paths[f.name][1]) if isinstance(f, Ligament) and f.name in paths else f
                   for f in model.forces)
    return eqx.tree_at(lambda m: (m.muscles, m.forces), model, (muscles, forces))


def read_ligaments(path: str | os.PathLike, tags=("Ligament",)) -> tuple[Muscle, ...]:
    """The Ligament paths of an ``.osim`` file (see
    `jaxmb.io._osim_forces.parse_paths`), for the model ``jaxmb.load_osim(path)``
    returns (same coordinates ``q``): [`jaxmb.Muscle`][jaxmb.Muscle] objects with ``kind`` the
    force's tag, whose lengths and moment arms jaxmb computes like a muscle's."""
    importer = _Importer(os.fspath(path), muscles=False)
    with warnings.catch_warnings():  # the skeleton's warnings were given by load_osim
        warnings.simplefilter("ignore")
        imp = importer.run()
    return parse_paths(importer.xml, importer.model_element, imp.coordinate_functions,
                       imp.model.body_names, tags)


# ---------------------------------------------------------------------------
# The importer
# ---------------------------------------------------------------------------


class _Importer(_JointReader):
    def __init__(self, path: str, muscles: bool | Sequence[str] = True, locked: dict[str, float] | None = None):
        super().__init__(XmlReader.parse(path))
        if isinstance(muscles, str):
            raise TypeError(f"read_osim: muscles must be True, False or a sequence of muscle names, got the string "
                            f"{muscles!r}; write muscles=[{muscles!r}].")
        self.muscle_names = None if isinstance(muscles, bool) else tuple(muscles)
        self.read_muscles = bool(muscles) or self.muscle_names is not None
        self.locked = dict(locked or {})
        self.root = self.xml.root
        self.model_element = None

    # -- run ---------------------------------------------------------------
    def run(self) -> OsimImport:
        doc = self.root
        if doc.tag != "OpenSimDocument":
            self.fail(doc, "the root element must be <OpenSimDocument>; this is not an .osim model.")
        models = self.xml.children(doc)  # before the version: a tool's setup file is no model of any version
        if not any(m.tag == "Model" for m in models):
            held = ", ".join(f"<{m.tag}>" for m in models) or "nothing"
            self.fail(doc, f"holds {held}, not a <Model>: this is not an .osim model (a setup or data file?).")
        if len(models) != 1 or models[0].tag != "Model":
            bad = next((m for m in models if m.tag != "Model"), models[1] if len(models) > 1 else doc)
            self.fail(bad, "an .osim document must hold exactly one <Model>.")
        version = doc.get("Version")
        try:
            version_number = int(version)
        except (TypeError, ValueError):
            self.fail(doc, f"missing or invalid Version attribute {version!r}.")
        if version_number < 40000:
            self.fail(doc, f"Version {version_number} is an OpenSim 3.x file; jaxmb reads OpenSim "
                           "4.x files: open it in OpenSim 4 and save it again.")
        model_el = self.model_element = models[0]
        # <ForceSet file="muscles.xml"/> and the like: OpenSim reads the named file
        # (relative to the model's folder) in place of the element.
        self.xml.include_files(model_el)
        sections = self.read_model_sections(model_el)
        self.register_frames(sections)
        bodies = self.read_bodies(sections.get("BodySet"))
        coords, joint_specs = self.read_joints(sections.get("JointSet"), bodies)
        couplers = self.read_constraints(sections.get("ConstraintSet"), coords)
        self.lock(coords, couplers)
        self.skip_set(sections.get("ContactGeometrySet"), "contact geometry is",
                      "Simulations of this model have no contact (the ForceSet's contact forces are skipped too).")
        self.skip_set(sections.get("ControllerSet"), "controllers are",
                      "Apply controls through jaxmb (a controller of jaxmb.control, or tau).")
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
        if is_kinematic(model):
            warn(f"{self.where(model_el)}: no body has mass: a kinematic model (kinematics, muscle paths "
                 "and moment arms work; forward dynamics and simulations are refused).")
        # Muscles index bodies in the model's (parents-first) order, known only now.
        muscles = self.muscles(model_el, functions, model.body_names)
        forces = parse_force_elements(self, model_el, functions, model) if self.read_muscles else ()
        if muscles or forces:
            model = Model(model.bodies, model.joints, model.coordinate_names, gravity=model.gravity,
                          q_default=model.q_default, q_lower=model.q_lower, q_upper=model.q_upper,
                          muscles=muscles, name=model.name, forces=forces)
        coordinates = tuple(
            OsimCoordinate(c.name, c.joint, c.default, c.range, c.locked, c.clamped,
                           kinds[c.name], functions[c.name]) for c in coords)
        return OsimImport(model=model, coordinates=coordinates, source=self.path)

    def lock(self, coords, couplers) -> None:
        """Apply `read_osim`'s ``locked``: each named coordinate is locked at its value."""
        by_name = {c.name: c for c in coords}
        for name, value in self.locked.items():
            c = by_name.get(name)
            if c is None or name in couplers:
                free = [k.name for k in coords if k.name not in couplers]
                what = "no coordinate" if c is None else "a dependent (coupled) coordinate"
                raise ModelError(f"read_osim(locked=...): {name!r} is {what} of {self.path}; lock one of its "
                                 f"independent coordinates: {free}.")
            value = float(value)
            if not np.isfinite(value):
                raise ModelError(f"read_osim(locked=...): the value of {name!r} must be finite, got {value}.")
            c.locked, c.default = True, value

    # -- model sections ----------------------------------------------------
    def read_model_sections(self, model_el: ET.Element) -> dict[str, ET.Element]:
        sets = {"BodySet", "JointSet", "ConstraintSet", "ForceSet", "MarkerSet",
                "ContactGeometrySet", "ControllerSet", "ProbeSet", "ComponentSet"}
        sections: dict[str, ET.Element] = {}
        for c in self.xml.children(model_el):
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

    def skip_set(self, el, what: str, consequence: str):
        """Skip the objects of a set jaxmb does not model (contact geometry, controllers)
        with one warning naming each, so that the model still loads for its kinematics,
        muscles and inverse dynamics (which use neither); `consequence` says what a
        simulation of it lacks."""
        objs = [] if el is None else self.set_objects(el)
        if objs:
            names = ", ".join(f"{o.tag} {o.get('name', '')!r}" for o in objs)
            warn(f"{self.where(el)}: {what} not modelled; skipped {len(objs)}: {names}. {consequence}")

    def check_component_set(self, el):
        if el is None:
            return
        for obj in self.set_objects(el):
            if obj.tag != "PhysicalOffsetFrame":
                self.unsupported(obj, "<ComponentSet>", "only PhysicalOffsetFrame components are read")

    # -- muscles -----------------------------------------------------------
    def muscles(self, model_el, functions, body_names) -> tuple[Any, ...]:
        if not self.read_muscles:
            return ()
        found = parse_muscles(self.xml, model_el, dict(functions), tuple(body_names))
        if self.muscle_names is None:
            return found
        names = [m.name for m in found]
        missing = [n for n in self.muscle_names if n not in names]
        if missing:
            raise ModelError(f"read_osim(muscles=...): {self.path} has no muscles {missing}; its muscles are "
                             f"{names}.")
        return tuple(m for m in found if m.name in self.muscle_names)
