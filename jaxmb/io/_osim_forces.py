"""Read the muscles of an OpenSim ``<ForceSet>`` into :class:`jaxmb.Muscle` objects.

Read: every muscle's ``GeometryPath`` (``PathPointSet`` with ``PathPoint``,
``ConditionalPathPoint``, ``MovingPathPoint``; ``PathWrapSet``) and the wrap
surfaces it names from the bodies' and ground's ``WrapObjectSet``
(``WrapSphere``, ``WrapCylinder``, ``WrapEllipsoid``, ``WrapTorus``), and the
Hill parameters of :class:`jaxmb.MuscleParameters`.

Muscle classes read: Thelen2003Muscle, Millard2012EquilibriumMuscle,
Millard2012AccelerationMuscle, DeGrooteFregly2016Muscle, Schutte1993Muscle_Deprecated,
Delp1990Muscle_Deprecated, RigidTendonMuscle, McKibbenActuator is not a muscle.

Other forces are not read. Every one of them is listed by name in one
``UserWarning`` per file ("skipped N forces: ..."), never dropped silently:

* ``Ligament`` (a passive force along a ``GeometryPath``, e.g. MoBL-ARMS's
  glenohumeral and coracohumeral ligaments): not a muscle, so it is not in
  ``model.muscles`` (``model.muscle_names`` stays OpenSim's ``getMuscles()``
  list). Its path is read by :func:`read_ligaments` / :func:`parse_paths`, which
  return :class:`jaxmb.Muscle` objects (``kind="Ligament"``) whose length and
  moment arms jaxmb computes like a muscle's (put them in a model with
  ``eqx.tree_at(lambda m: m.muscles, model, ligaments)``).
* Forces that act on coordinates or bodies and have no path (listed in
  ``SKIPPED_FORCES``): CoordinateLimitForce, CoordinateActuator, PointActuator,
  TorqueActuator, ExpressionBasedCoordinateForce, SpringGeneralizedForce,
  ActivationCoordinateActuator, BodyActuator, PointToPointActuator.
* Path forces without muscle parameters (``PATH_FORCES``): PathSpring,
  ClutchedPathSpring, PathActuator; readable with :func:`parse_paths`.

Disabled muscles (``appliesForce``/``isDisabled``) are still read: their
geometry is valid. Anything else in the ForceSet raises :class:`jaxmb.ModelError`
naming the element.

MovingPathPoint functions are evaluated at the coordinate clamped to its range
(:class:`jaxmb._muscles.ClampedCoordinate`), as OpenSim 4.6 does.
"""

from __future__ import annotations

import os
import warnings
import xml.etree.ElementTree as ET

import numpy as np

from .._errors import ModelError
from .._functions import AbstractJointFunction, Constant
from .._muscles import (ClampedCoordinate, ConditionalPathPoint, MovingPathPoint, Muscle, MuscleParameters, PathPoint,
                        WrapCylinder, WrapEllipsoid, WrapSphere, WrapTorus)

MUSCLE_TYPES = (
    "Thelen2003Muscle", "Millard2012EquilibriumMuscle", "Millard2012AccelerationMuscle",
    "DeGrooteFregly2016Muscle", "Schutte1993Muscle_Deprecated", "Delp1990Muscle_Deprecated",
    "Thelen2003Muscle_Deprecated", "RigidTendonMuscle", "Muscle",
)
SKIPPED_FORCES = (
    "CoordinateLimitForce", "CoordinateActuator", "PointActuator", "TorqueActuator",
    "ExpressionBasedCoordinateForce", "SpringGeneralizedForce", "ActivationCoordinateActuator",
    "BodyActuator", "PointToPointActuator",
)
PATH_FORCES = ("Ligament", "PathSpring", "ClutchedPathSpring", "PathActuator")
_PARAMS = ("max_isometric_force", "optimal_fiber_length", "tendon_slack_length",
           "pennation_angle_at_optimal", "max_contraction_velocity")


def _fail(source, el, msg):
    name = el.get("name", "") if el is not None else ""
    raise ModelError(f"{source}: <{el.tag if el is not None else '?'} name={name!r}>: {msg}")


def _objects(el):
    if el is None:
        return []
    objs = el.find("objects")
    return list(objs) if objs is not None else []


def _floats(source, el, tag, n, default=None):
    c = el.find(tag)
    if c is None or c.text is None or not c.text.strip():
        if default is None:
            _fail(source, el, f"missing <{tag}>.")
        return np.asarray(default, dtype=float)
    vals = np.asarray([float(v) for v in c.text.split()], dtype=float)
    if n is not None and vals.shape != (n,):
        _fail(source, el, f"<{tag}> must have {n} values, got {c.text!r}.")
    return vals


def _text(el, tag, default=""):
    c = el.find(tag)
    return c.text.strip() if c is not None and c.text is not None else default


def _frame_body(source, el, body_names):
    ref = _text(el, "socket_parent_frame") or _text(el, "body") or _text(el, "parent_frame")
    if not ref:
        _fail(source, el, "has no socket_parent_frame.")
    parts = [p for p in ref.split("/") if p and p not in (".", "..")]
    name = parts[-1]
    if len(parts) >= 2 and parts[-2] == "bodyset":
        name = parts[-1]
    elif parts and parts[0] == "bodyset" and len(parts) > 2:
        _fail(source, el, f"path points on offset frames ({ref!r}) are not supported.")
    if name == "ground":
        return "ground"
    if name not in body_names:
        _fail(source, el, f"frame {ref!r} is not a body of the model.")
    return name


def _coordinate(source, el, ref, coordinate_functions):
    name = ref.split("/")[-1]
    if name not in coordinate_functions:
        _fail(source, el, f"unknown coordinate {ref!r}.")
    return coordinate_functions[name]


def _wrap_objects(root, source, body_names):
    """name -> (type, element, body) for every WrapObjectSet of the bodies and ground."""
    out = {}
    holders = []
    ground = root.find("Ground")
    if ground is not None:
        holders.append(("ground", ground))
    bodyset = root.find("BodySet")
    for b in _objects(bodyset):
        holders.append((b.get("name"), b))
    for bname, holder in holders:
        for w in _objects(holder.find("WrapObjectSet")):
            out[w.get("name")] = (w.tag, w, bname)
    return out


def _make_wrap(source, tag, w, body, rng, method):
    name = w.get("name")
    active = _text(w, "active", "true").lower() != "false"
    common = dict(translation=_floats(source, w, "translation", 3, (0, 0, 0)),
                  xyz_body_rotation=_floats(source, w, "xyz_body_rotation", 3, (0, 0, 0)),
                  quadrant=_text(w, "quadrant", "all") or "all", range=rng, method=method)
    if not active:
        return None
    if tag == "WrapSphere":
        return WrapSphere(name, body, float(_floats(source, w, "radius", 1)[0]), **common)
    if tag == "WrapCylinder":
        return WrapCylinder(name, body, float(_floats(source, w, "radius", 1)[0]),
                            float(_floats(source, w, "length", 1, (1.0,))[0]), **common)
    if tag == "WrapEllipsoid":
        return WrapEllipsoid(name, body, _floats(source, w, "dimensions", 3), **common)
    if tag == "WrapTorus":
        return WrapTorus(name, body, float(_floats(source, w, "inner_radius", 1)[0]),
                         float(_floats(source, w, "outer_radius", 1)[0]), **common)
    _fail(source, w, "unsupported wrap object type (jaxmb reads WrapSphere, WrapCylinder, "
                     "WrapEllipsoid and WrapTorus).")


def _moving_coordinate(source, pt, axis, base, coordinate_functions, ranges):
    from ._osim_functions import parse_function

    fn_el = pt.find(f"{axis}_location")
    if fn_el is None:
        return Constant(float(base))
    inner_ref = _text(pt, f"socket_{axis}_coordinate")
    funcs = [c for c in fn_el] if fn_el.tag.endswith("_location") else [fn_el]
    if not funcs:
        return Constant(float(base))
    inner = _coordinate(source, pt, inner_ref, coordinate_functions) if inner_ref else None
    if inner is None:
        _fail(source, pt, f"{axis}_location has a function but no socket_{axis}_coordinate.")
    rng = (ranges or {}).get(inner_ref.split("/")[-1])
    if rng is not None:  # OpenSim clamps the coordinate to its range here
        inner = ClampedCoordinate(inner, rng[0], rng[1])
    return parse_function(funcs[0], inner)


def parse_muscles(root: ET.Element, coordinate_functions: dict[str, AbstractJointFunction],
                  body_names: tuple[str, ...], source: str) -> tuple[Muscle, ...]:
    """The muscles of the model's ForceSet.

    **Arguments:**

    - `root`: the ``<Model>`` element (or the document root ``<OpenSimDocument>``).
    - `coordinate_functions`: every OpenSim coordinate name -> its joint function of q.
    - `body_names`: the model's body names ('ground' is the fixed frame).
    - `source`: the file name, for error messages.

    **Returns:** a tuple of :class:`jaxmb.Muscle` in file order.
    """
    if root.tag != "Model":
        model_el = root.find("Model")
        if model_el is None:
            raise ModelError(f"{source}: no <Model> element.")
        root = model_el
    forceset = root.find("ForceSet")
    if forceset is None:
        return ()
    wraps = _wrap_objects(root, source, body_names)
    ranges = _coordinate_ranges(root)
    muscles, skipped = [], {}
    for f in _objects(forceset):
        if f.tag in SKIPPED_FORCES or f.tag in PATH_FORCES:
            skipped.setdefault(f.tag, []).append(f.get("name", ""))
            continue
        if f.tag not in MUSCLE_TYPES:
            _fail(source, f, "unsupported force type in <ForceSet> (jaxmb reads muscles; see "
                             "jaxmb.io._osim_forces.SKIPPED_FORCES and PATH_FORCES for the forces it skips).")
        muscles.append(_parse_muscle(f, coordinate_functions, body_names, source, wraps, ranges))
    if skipped:
        parts = [f"{len(v)} {k} ({', '.join(v)})" for k, v in skipped.items()]
        hint = (" Ligament paths: jaxmb.io._osim_forces.read_ligaments(path)."
                if "Ligament" in skipped else "")
        warnings.warn(f"{source}: the ForceSet's non-muscle forces are not part of the model; skipped "
                      f"{sum(len(v) for v in skipped.values())}: " + "; ".join(parts) + "." + hint, stacklevel=4)
    return tuple(muscles)


def parse_paths(root: ET.Element, coordinate_functions: dict[str, AbstractJointFunction],
                body_names: tuple[str, ...], source: str, tags=PATH_FORCES) -> tuple[Muscle, ...]:
    """The ``GeometryPath`` of every ForceSet element whose tag is in `tags` (default:
    Ligament, PathSpring, ClutchedPathSpring, PathActuator), as :class:`jaxmb.Muscle`
    objects with ``kind`` = the tag and default Hill parameters."""
    if root.tag != "Model":
        root = root.find("Model")
    forceset = root.find("ForceSet") if root is not None else None
    if forceset is None:
        return ()
    wraps = _wrap_objects(root, source, body_names)
    ranges = _coordinate_ranges(root)
    return tuple(_parse_muscle(f, coordinate_functions, body_names, source, wraps, ranges)
                 for f in _objects(forceset) if f.tag in tags)


def read_ligaments(path, tags=("Ligament",)) -> tuple[Muscle, ...]:
    """The Ligament paths of an ``.osim`` file (see :func:`parse_paths`), for the
    model ``jaxmb.load_osim(path)`` returns (same coordinates ``q``)."""
    from ._osim import read_osim

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imp = read_osim(path, muscles=False)
    root = ET.parse(os.fspath(path)).getroot()
    return parse_paths(root, imp.coordinate_functions, imp.model.body_names, os.fspath(path), tags)


def _coordinate_ranges(root):
    out = {}
    for c in root.iter("Coordinate"):
        r = c.find("range")
        if c.get("name") and r is not None and r.text:
            vals = [float(v) for v in r.text.split()]
            if len(vals) == 2:
                out[c.get("name")] = (vals[0], vals[1])
    return out


def _parse_muscle(f, coordinate_functions, body_names, source, wraps, ranges=None):
    name = f.get("name")
    gp = f.find("GeometryPath")
    if gp is None:
        _fail(source, f, "muscle has no <GeometryPath>.")
    points = []
    for pt in _objects(gp.find("PathPointSet")):
        pname = pt.get("name", "")
        body = _frame_body(source, pt, body_names)
        if pt.tag == "PathPoint":
            points.append(PathPoint(body, _floats(source, pt, "location", 3), name=pname))
        elif pt.tag == "ConditionalPathPoint":
            ref = _text(pt, "socket_coordinate") or _text(pt, "coordinate")
            coord = _coordinate(source, pt, ref, coordinate_functions)
            points.append(ConditionalPathPoint(body, _floats(source, pt, "location", 3), coord,
                                               _floats(source, pt, "range", 2), name=pname))
        elif pt.tag == "MovingPathPoint":
            base = _floats(source, pt, "location", 3, (0, 0, 0))
            fx = _moving_coordinate(source, pt, "x", base[0], coordinate_functions, ranges)
            fy = _moving_coordinate(source, pt, "y", base[1], coordinate_functions, ranges)
            fz = _moving_coordinate(source, pt, "z", base[2], coordinate_functions, ranges)
            points.append(MovingPathPoint(body, fx, fy, fz, name=pname))
        else:
            _fail(source, pt, f"unsupported path point type in muscle {name!r}.")
    wlist = []
    for pw in _objects(gp.find("PathWrapSet")):
        wname = _text(pw, "wrap_object")
        if wname not in wraps:
            _fail(source, pw, f"muscle {name!r} names unknown wrap object {wname!r}.")
        tag, wel, body = wraps[wname]
        rng = _floats(source, pw, "range", 2, (-1, -1)).astype(int)
        w = _make_wrap(source, tag, wel, body, (int(rng[0]), int(rng[1])), _text(pw, "method", "hybrid"))
        if w is not None:
            wlist.append(w)
    vals = {}
    for p in _PARAMS:
        c = f.find(p)
        if c is not None and c.text:
            vals[p] = float(c.text)
    params = MuscleParameters(**vals)
    try:
        return Muscle(name, points, wlist, params, kind=f.tag)
    except ModelError as exc:
        _fail(source, f, str(exc))
