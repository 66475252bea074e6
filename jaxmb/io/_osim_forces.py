"""Read the muscles of an OpenSim ``<ForceSet>`` into [`jaxmb.Muscle`][jaxmb.Muscle] objects.

Read: every muscle's ``GeometryPath`` (``PathPointSet`` with ``PathPoint``,
``ConditionalPathPoint``, ``MovingPathPoint``; ``PathWrapSet``) and the wrap
surfaces it names from the bodies' and ground's ``WrapObjectSet``
(``WrapSphere``, ``WrapCylinder``, ``WrapEllipsoid``, ``WrapTorus``), or its
``FunctionBasedPath`` (a ``MultivariatePolynomialFunction`` length, as OpenSim's
``PolynomialPathFitter`` writes it) into a [`jaxmb.FunctionBasedPath`][jaxmb.FunctionBasedPath]; the
Hill parameters of [`jaxmb.MuscleParameters`][jaxmb.MuscleParameters], and the muscle's force
model and activation dynamics (`jaxmb.io._osim_muscle_models`).

Muscle classes read: Thelen2003Muscle, Millard2012EquilibriumMuscle,
Millard2012AccelerationMuscle, DeGrooteFregly2016Muscle, Schutte1993Muscle_Deprecated,
Delp1990Muscle_Deprecated, RigidTendonMuscle, McKibbenActuator is not a muscle.

The ForceSet's other elements of ``FORCE_ELEMENTS`` (CoordinateActuator, PointActuator,
TorqueActuator, CoordinateLimitForce, Ligament, PointToPointSpring, BushingForce,
ExpressionBasedCoordinateForce) are read by `jaxmb.io._osim_actuators` into
``model.forces``. A Ligament is not a muscle, so it is not in ``model.muscles``
(``model.muscle_names`` stays OpenSim's ``getMuscles()`` list); `parse_paths` also reads
its path alone.

Other forces are not read. Every one of them is listed by name in one
``UserWarning`` per file ("skipped N forces: ..."), never dropped silently:

* Forces without a jaxmb counterpart yet (listed in ``SKIPPED_FORCES``):
  SpringGeneralizedForce, ActivationCoordinateActuator, BodyActuator, PointToPointActuator.
* Path forces without muscle parameters (``PATH_FORCES``): PathSpring,
  ClutchedPathSpring, PathActuator; readable with `parse_paths`.
* Contact forces (``CONTACT_FORCES``): HuntCrossleyForce, ElasticFoundationForce,
  SmoothSphereHalfSpaceForce, skipped with the ContactGeometrySet they act between.

Disabled muscles (``appliesForce``/``isDisabled``) are still read: their
geometry is valid. Anything else in the ForceSet raises [`jaxmb.ModelError`][jaxmb.ModelError]
naming the element.

MovingPathPoint functions are evaluated at the coordinate clamped to its range
(`jaxmb._muscles.ClampedCoordinate`), as OpenSim 4.6 does.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from .._errors import ModelError, warn
from .._functions import AbstractJointFunction, Constant
from .._muscles import (ClampedCoordinate, ConditionalPathPoint, FunctionBasedPath, MovingPathPoint,
                        MultivariatePolynomial, Muscle, MuscleParameters, PathPoint, WrapCylinder, WrapEllipsoid,
                        WrapSphere, WrapTorus)
from ._osim_functions import parse_function
from ._osim_muscle_models import MIN_CONTROL_DEFAULTS, force_model
from ._xml import XmlReader

MUSCLE_TYPES = (
    "Thelen2003Muscle", "Millard2012EquilibriumMuscle", "Millard2012AccelerationMuscle",
    "DeGrooteFregly2016Muscle", "Schutte1993Muscle_Deprecated", "Delp1990Muscle_Deprecated",
    "Thelen2003Muscle_Deprecated", "RigidTendonMuscle", "Muscle",
)
FORCE_ELEMENTS = (  # read by jaxmb.io._osim_actuators into model.forces
    "CoordinateActuator", "PointActuator", "TorqueActuator", "CoordinateLimitForce", "Ligament",
    "PointToPointSpring", "BushingForce", "ExpressionBasedCoordinateForce",
)
SKIPPED_FORCES = ("SpringGeneralizedForce", "ActivationCoordinateActuator", "BodyActuator", "PointToPointActuator")
# Forces between the ContactGeometrySet's objects, which are skipped too (`_osim._Importer.skip_set`).
CONTACT_FORCES = ("HuntCrossleyForce", "ElasticFoundationForce", "SmoothSphereHalfSpaceForce")
PATH_FORCES = ("PathSpring", "ClutchedPathSpring", "PathActuator")
_PARAMS = ("max_isometric_force", "optimal_fiber_length", "tendon_slack_length",
           "pennation_angle_at_optimal", "max_contraction_velocity")


def _first(xml: XmlReader, el: ET.Element | None, tag: str) -> ET.Element | None:
    """The first child `tag` of `el` (None if `el` or the child is absent)."""
    found = [] if el is None else xml.children(el, tag)
    return found[0] if found else None


def _text(xml: XmlReader, el: ET.Element, tag: str, default: str = "") -> str:
    c = _first(xml, el, tag)
    return (c.text or "").strip() if c is not None and c.text is not None else default


def _floats(xml: XmlReader, el: ET.Element, tag: str, n: int, default=None):
    """`n` finite numbers of the child `tag` of `el` (`default` if absent or blank)."""
    if default is None:
        return xml.floats(el, tag, n)
    return xml.floats(el, tag, n, default, blank_is_missing=True)


def _frame_body(xml, el, body_names):
    ref = _text(xml, el, "socket_parent_frame") or _text(xml, el, "body") or _text(xml, el, "parent_frame")
    if not ref:
        xml.fail(el, "has no <socket_parent_frame>; name the body the point is fixed to.")
    parts = [p for p in ref.split("/") if p and p not in (".", "..")]
    name = parts[-1]
    if len(parts) >= 2 and parts[-2] == "bodyset":
        name = parts[-1]
    elif parts and parts[0] == "bodyset" and len(parts) > 2:
        xml.fail(el, f"path points on offset frames ({ref!r}) are not supported; give the point's "
                     "location in its body.")
    if name == "ground":
        return "ground"
    if name not in body_names:
        xml.fail(el, f"frame {ref!r} is not a body of the model.")
    return name


def _coordinate(xml, el, ref, coordinate_functions):
    name = ref.split("/")[-1]
    if name not in coordinate_functions:
        xml.fail(el, f"unknown coordinate {ref!r}.")
    return coordinate_functions[name]


def _wrap_objects(xml: XmlReader, model_el):
    """name -> (type, element, body) for every WrapObjectSet of the bodies and ground."""
    out = {}
    holders = []
    ground = _first(xml, model_el, "Ground")
    if ground is not None:
        holders.append(("ground", ground))
    for b in xml.set_objects(_first(xml, model_el, "BodySet")):
        holders.append((b.get("name"), b))
    for bname, holder in holders:
        for w in xml.set_objects(_first(xml, holder, "WrapObjectSet")):
            out[w.get("name")] = (w.tag, w, bname)
    return out


def _make_wrap(xml, tag, w, body, rng, method):
    name = w.get("name")
    active = _text(xml, w, "active", "true").lower() != "false"
    common = dict(translation=_floats(xml, w, "translation", 3, (0, 0, 0)),
                  xyz_body_rotation=_floats(xml, w, "xyz_body_rotation", 3, (0, 0, 0)),
                  quadrant=_text(xml, w, "quadrant", "all") or "all", range=rng, method=method)
    if not active:
        return None
    if tag == "WrapSphere":
        return WrapSphere(name, body, float(_floats(xml, w, "radius", 1)[0]), **common)
    if tag == "WrapCylinder":
        return WrapCylinder(name, body, float(_floats(xml, w, "radius", 1)[0]),
                            float(_floats(xml, w, "length", 1, (1.0,))[0]), **common)
    if tag == "WrapEllipsoid":
        return WrapEllipsoid(name, body, _floats(xml, w, "dimensions", 3), **common)
    if tag == "WrapTorus":
        return WrapTorus(name, body, float(_floats(xml, w, "inner_radius", 1)[0]),
                         float(_floats(xml, w, "outer_radius", 1)[0]), **common)
    xml.fail(w, "unsupported wrap object type (jaxmb reads WrapSphere, WrapCylinder, "
                "WrapEllipsoid and WrapTorus).")


def _moving_coordinate(xml, pt, axis, base, coordinate_functions, ranges):
    fn_el = _first(xml, pt, f"{axis}_location")
    if fn_el is None:
        return Constant(float(base))
    inner_ref = _text(xml, pt, f"socket_{axis}_coordinate")
    funcs = xml.children(fn_el)
    if not funcs:
        return Constant(float(base))
    if not inner_ref:
        xml.fail(pt, f"<{axis}_location> has a function but no <socket_{axis}_coordinate>; name the "
                     "coordinate it is a function of.")
    inner = _coordinate(xml, pt, inner_ref, coordinate_functions)
    rng = (ranges or {}).get(inner_ref.split("/")[-1])
    if rng is not None:  # OpenSim clamps the coordinate to its range here
        inner = ClampedCoordinate(inner, rng[0], rng[1])
    return parse_function(funcs[0], inner, xml)


def _model_element(xml: XmlReader, root: ET.Element) -> ET.Element:
    if root.tag == "Model":
        return root
    model_el = _first(xml, root, "Model")
    if model_el is None:
        xml.fail(root, "no <Model> element.")
    return model_el


def _forceset(xml: XmlReader, root: ET.Element):
    """``(<ForceSet>, wrap objects by name, coordinate ranges by name)`` of the model, what
    every path read from its ForceSet needs; None where the model has no ForceSet."""
    model_el = _model_element(xml, root)
    forceset = _first(xml, model_el, "ForceSet")
    if forceset is None:
        return None
    return forceset, _wrap_objects(xml, model_el), _coordinate_ranges(xml, model_el)


def parse_muscles(xml: XmlReader, model_el: ET.Element,
                  coordinate_functions: dict[str, AbstractJointFunction],
                  body_names: tuple[str, ...]) -> tuple[Muscle, ...]:
    """The muscles of the model's ForceSet.

    **Arguments:**

    - `xml`: the file's reader (errors name the file and line).
    - `model_el`: the ``<Model>`` element (or the document root ``<OpenSimDocument>``).
    - `coordinate_functions`: every OpenSim coordinate name -> its joint function of q.
    - `body_names`: the model's body names ('ground' is the fixed frame).

    **Returns:** a tuple of [`jaxmb.Muscle`][jaxmb.Muscle] in file order.
    """
    context = _forceset(xml, model_el)
    if context is None:
        return ()
    forceset, wraps, ranges = context
    muscles, skipped = [], {}
    for f in xml.set_objects(forceset):
        if f.tag in FORCE_ELEMENTS:
            continue
        if f.tag in SKIPPED_FORCES or f.tag in PATH_FORCES or f.tag in CONTACT_FORCES:
            skipped.setdefault(f.tag, []).append(f.get("name", ""))
            continue
        if f.tag not in MUSCLE_TYPES:
            xml.fail(f, "unsupported force type in <ForceSet> (jaxmb reads muscles; see "
                        "jaxmb.io._osim_forces.SKIPPED_FORCES and PATH_FORCES for the forces it skips).")
        muscles.append(_parse_muscle(xml, f, coordinate_functions, body_names, wraps, ranges))
    if skipped:
        parts = [f"{len(v)} {k} ({', '.join(v)})" for k, v in skipped.items()]
        warn(f"{xml.path}: the ForceSet's non-muscle forces are not part of the model; skipped "
             f"{sum(len(v) for v in skipped.values())}: " + "; ".join(parts) + ".")
    return tuple(muscles)


def parse_paths(xml: XmlReader, model_el: ET.Element, coordinate_functions: dict[str, AbstractJointFunction],
                body_names: tuple[str, ...], tags=PATH_FORCES) -> tuple[Muscle, ...]:
    """The ``GeometryPath`` of every ForceSet element whose tag is in `tags` (default:
    PathSpring, ClutchedPathSpring, PathActuator; e.g. ``("Ligament",)``), as [`jaxmb.Muscle`][jaxmb.Muscle]
    objects with ``kind`` = the tag and default Hill parameters."""
    context = _forceset(xml, model_el)
    if context is None:
        return ()
    forceset, wraps, ranges = context
    return tuple(_parse_muscle(xml, f, coordinate_functions, body_names, wraps, ranges)
                 for f in xml.set_objects(forceset) if f.tag in tags)


def _coordinate_ranges(xml, model_el):
    out = {}
    for c in model_el.iter("Coordinate"):
        if not c.get("name"):
            continue
        r = xml.floats(c, "range", 2, None, blank_is_missing=True)
        if r is not None:
            out[c.get("name")] = (float(r[0]), float(r[1]))
    return out


def _parse_function_path(xml, name, fp, coordinate_functions):
    """The FunctionBasedPath `fp` of muscle `name`: its coordinates and its polynomial length."""
    refs = _text(xml, fp, "coordinate_paths").split()
    if not refs:
        xml.fail(fp, f"muscle {name!r}: <coordinate_paths> names no coordinate.")
    coords = [_coordinate(xml, fp, ref, coordinate_functions) for ref in refs]
    holder = _first(xml, fp, "length_function")
    poly = None if holder is None else _first(xml, holder, "MultivariatePolynomialFunction")
    if poly is None:
        xml.fail(fp, f"muscle {name!r}: jaxmb reads a FunctionBasedPath whose <length_function> is a "
                     "MultivariatePolynomialFunction (as OpenSim's PolynomialPathFitter writes it).")
    for tag in ("moment_arm_functions", "lengthening_speed_function"):
        given = _first(xml, fp, tag)
        if given is not None and len(given):
            xml.fail(given, f"muscle {name!r}: jaxmb takes a FunctionBasedPath's moment arms and lengthening speed "
                            f"from its length function (R = -dL/dq); remove <{tag}> or leave it empty.")
    try:
        length = MultivariatePolynomial(xml.floats(poly, "coefficients"), int(xml.number(poly, "dimension")),
                                        int(xml.number(poly, "order")))
        return FunctionBasedPath(coords, length)
    except ModelError as exc:
        xml.fail(poly, f"muscle {name!r}: {exc}")


def parse_function_path_set(path: str, coordinate_functions: dict[str, AbstractJointFunction]
                            ) -> tuple[XmlReader, dict[str, tuple[ET.Element, FunctionBasedPath]]]:
    """The paths of an OpenSim path set file (``<Set_FunctionBasedPath_>``, as OpenSim's
    ``PolynomialPathFitter`` and `jaxmb.io.write_function_paths` write it): its reader and,
    per force name (the path's name ``/forceset/<name>``), the element and its path."""
    xml = XmlReader.parse(path)
    root = xml.root
    holder = root if root.tag == "Set_FunctionBasedPath_" else _first(xml, root, "Set_FunctionBasedPath_")
    if holder is None:
        xml.fail(root, "not an OpenSim path set: expected <Set_FunctionBasedPath_> (the file OpenSim's "
                       "PolynomialPathFitter or jaxmb.io.write_function_paths writes).")
    out = {}
    for fp in xml.set_objects(holder):
        if fp.tag != "FunctionBasedPath":
            xml.unsupported(fp, "<Set_FunctionBasedPath_>")
        name = (fp.get("name") or "").rsplit("/", 1)[-1]
        if not name:
            xml.fail(fp, "a FunctionBasedPath in a path set is named after its force (/forceset/<name>); "
                         "this one has no name.")
        if name in out:
            xml.fail(fp, f"a second path for force {name!r}.")
        out[name] = (fp, _parse_function_path(xml, name, fp, coordinate_functions))
    return xml, out


def _parse_muscle(xml, f, coordinate_functions, body_names, wraps, ranges=None):
    name = f.get("name")
    gp = _first(xml, f, "GeometryPath")
    fp = _first(xml, f, "FunctionBasedPath")
    if gp is None and fp is None:
        xml.fail(f, "muscle has no <GeometryPath> or <FunctionBasedPath>; give its path points.")
    path, points = None, []
    if gp is None:
        path = _parse_function_path(xml, name, fp, coordinate_functions)
    else:
        try:
            points = _parse_points(xml, name, gp, coordinate_functions, body_names, ranges)
        except ModelError as exc:  # name the muscle: point names need not contain it
            raise ModelError(f"muscle {name!r}: {exc}") from None
    wlist = []
    for pw in xml.set_objects(_first(xml, gp, "PathWrapSet")) if gp is not None else ():
        wname = _text(xml, pw, "wrap_object")
        if wname not in wraps:
            xml.fail(pw, f"muscle {name!r} names unknown wrap object {wname!r}.")
        tag, wel, body = wraps[wname]
        rng = _floats(xml, pw, "range", 2, (-1, -1)).astype(int)
        try:
            w = _make_wrap(xml, tag, wel, body, (int(rng[0]), int(rng[1])), _text(xml, pw, "method", "hybrid"))
        except ModelError as exc:
            xml.fail(wel, f"(wrap object of muscle {name!r}) {exc}")
        if w is not None:
            wlist.append(w)
    vals = {}
    for p in _PARAMS:
        v = xml.floats(f, p, 1, None, blank_is_missing=True) if _first(xml, f, p) is not None else None
        if v is not None:
            vals[p] = float(v[0])
    params = MuscleParameters(**vals)
    try:
        model, activation = force_model(xml, f, params) if f.tag in MUSCLE_TYPES else (None, None)
        controls = {}  # a muscle's excitation bounds (static optimization's activation bounds)
        if f.tag in MUSCLE_TYPES:
            controls = {k: xml.number(f, k, None, blank_is_missing=True) for k in ("min_control", "max_control")}
            controls = {k: v for k, v in controls.items() if v is not None}
            controls.setdefault("min_control", MIN_CONTROL_DEFAULTS.get(f.tag, 0.0))
        return Muscle(name, points, wlist, params, kind=f.tag, force_model=model, activation_dynamics=activation,
                      path=path, **controls)
    except ModelError as exc:
        xml.fail(f, str(exc))


def _parse_points(xml, name, gp, coordinate_functions, body_names, ranges):
    """The path points of the GeometryPath `gp` of muscle `name`."""
    points = []
    for pt in xml.set_objects(_first(xml, gp, "PathPointSet")):
        pname = pt.get("name", "")
        body = _frame_body(xml, pt, body_names)
        if pt.tag == "PathPoint":
            points.append(PathPoint(body, _floats(xml, pt, "location", 3), name=pname))
        elif pt.tag == "ConditionalPathPoint":
            ref = _text(xml, pt, "socket_coordinate") or _text(xml, pt, "coordinate")
            coord = _coordinate(xml, pt, ref, coordinate_functions)
            points.append(ConditionalPathPoint(body, _floats(xml, pt, "location", 3), coord,
                                               _floats(xml, pt, "range", 2), name=pname))
        elif pt.tag == "MovingPathPoint":
            base = _floats(xml, pt, "location", 3, (0, 0, 0))
            fx = _moving_coordinate(xml, pt, "x", base[0], coordinate_functions, ranges)
            fy = _moving_coordinate(xml, pt, "y", base[1], coordinate_functions, ranges)
            fz = _moving_coordinate(xml, pt, "z", base[2], coordinate_functions, ranges)
            points.append(MovingPathPoint(body, fx, fy, fz, name=pname))
        else:
            xml.fail(pt, f"unsupported path point type in muscle {name!r} (jaxmb reads PathPoint, "
                         "ConditionalPathPoint and MovingPathPoint).")
    return points
