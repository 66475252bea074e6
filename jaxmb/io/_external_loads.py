"""OpenSim ``ExternalLoads`` files: ``ExternalForce`` elements and their data file.

Each ``<ExternalForce>`` names the body it acts on (``applied_to_body``), the frames its
force and point are expressed in (``force_expressed_in_body``,
``point_expressed_in_body``: ``ground`` or a body) and the data columns: as in OpenSim,
an identifier is a prefix that must match exactly three columns of the data file
(x, y, z in file order), e.g. ``ground_force_v`` for ``ground_force_vx/vy/vz``. An empty
``point_identifier`` applies the force at the body's origin; an empty
``torque_identifier`` or ``force_identifier`` applies none. The data file is the
``<datafile>`` of ``<ExternalLoads>`` (or an element's ``data_source_name``), relative
to the XML file's folder.
"""

from __future__ import annotations

import difflib
import os

import numpy as np

from .._errors import ModelError, warn
from .._model import Model
from .._motion import ExternalForce
from ._storage import MotionData, read_storage
from ._xml import XmlReader

__all__ = ["read_external_loads"]

_FORCE_TAGS = {"isDisabled", "appliesForce", "applied_to_body", "force_expressed_in_body",
               "point_expressed_in_body", "force_identifier", "point_identifier", "torque_identifier",
               "data_source_name"}
_LOADS_TAGS = {"objects", "groups", "datafile", "defaults", "external_loads_model_kinematics_file",
               "lowpass_cutoff_frequency_for_load_kinematics"}


def _columns(xml: XmlReader, el, data: MotionData, prefix: str, what: str):
    if not prefix:
        return None
    idx = [j for j, s in enumerate(data.labels) if s.startswith(prefix)]
    if len(idx) != 3:
        found = [data.labels[j] for j in idx]
        xml.fail(el, f"{what} {prefix!r} matches {len(idx)} columns of {data.source} ({found}); an identifier "
                     f"is the common prefix of exactly 3 columns (x, y, z). Columns: {data.labels}.")
    values = data.values[:, idx]
    bad = np.argwhere(~np.isfinite(values))
    if bad.size:
        row, col = bad[0]
        xml.fail(el, f"{what} {prefix!r}: column {data.labels[idx[col]]!r} of {data.source} is "
                     f"{values[row, col]} at time {data.time[row]:g} s (row {row + 1} of the data); "
                     f"{len(bad)} entries are not finite. Fill or cut the gap in the data file.")
    return values


def read_external_loads(path: str | os.PathLike, model: Model | None = None) -> tuple[ExternalForce, ...]:
    """Read an OpenSim ``ExternalLoads`` XML file and its data file.

    **Arguments:**

    - `path`: the ``.xml`` file.
    - `model`: if given, every body an external force names is checked against it.

    **Returns:**

    A tuple of [`jaxmb.ExternalForce`][jaxmb.ExternalForce] (disabled forces left out),
    for [`jaxmb.inverse_dynamics_motion`][jaxmb.inverse_dynamics_motion].

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] naming the element and ``file:line`` for a
    body the model lacks, an identifier that does not match three data columns, a
    missing data file, or an element jaxmb does not know.
    """
    xml = XmlReader.parse(path)
    root = xml.root
    loads = root if root.tag == "ExternalLoads" else xml.child(root, "ExternalLoads")
    xml.check_children(loads, _LOADS_TAGS, "<ExternalLoads>")
    for tag in ("external_loads_model_kinematics_file", "lowpass_cutoff_frequency_for_load_kinematics"):
        value = xml.text(loads, tag, "")
        if value and value != "Unassigned" and not value.startswith("-"):
            warn(f"{xml.where(loads)}: <{tag}> {value!r} is ignored: jaxmb places points expressed in "
                 "ground on their body at each frame's coordinates.")
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    default_file = xml.text(loads, "datafile", "")
    tables: dict[str, MotionData] = {}

    def table(name, el):
        if not name or name == "Unassigned":
            xml.fail(el, "no data file: give <datafile> in <ExternalLoads> (or <data_source_name>).")
        full = name if os.path.isabs(name) else os.path.join(folder, name)
        if not os.path.exists(full):
            xml.fail(el, f"data file {name!r} not found (looked for {full}); paths are relative to the XML "
                         "file's folder.")
        if full not in tables:
            tables[full] = read_storage(full)
        return tables[full]

    forces = []
    objects = xml.child(loads, "objects", required=False)
    for el in [] if objects is None else xml.children(objects):
        if el.tag != "ExternalForce":
            xml.unsupported(el, "<ExternalLoads>", "only ExternalForce elements are read")
        xml.check_children(el, _FORCE_TAGS, "<ExternalForce>")
        if xml.boolean(el, "isDisabled", False) or not xml.boolean(el, "appliesForce", True):
            continue
        source = xml.text(el, "data_source_name", "")
        data = table(default_file or source, el)
        name = el.get("name") or "ExternalForce"
        body = xml.text(el, "applied_to_body")
        force_frame = xml.text(el, "force_expressed_in_body", "ground")
        point_frame = xml.text(el, "point_expressed_in_body", "ground")
        if model is not None:
            for role, b, ground_ok in (("applied_to_body", body, False), ("force_expressed_in_body", force_frame, True),
                                       ("point_expressed_in_body", point_frame, True)):
                if not ((b == "ground" and ground_ok) or (b != "ground" and b in model.body_names)):
                    close = difflib.get_close_matches(b, model.body_names, n=3, cutoff=0.5)
                    xml.fail(el, f"<{role}> {b!r} is not a body of model {model.name!r}"
                                 f"{' (closest: ' + ', '.join(close) + ')' if close else ''}; "
                                 f"name one of its bodies{' or ground' if ground_ok else ''}.")
        force = _columns(xml, el, data, xml.text(el, "force_identifier", ""), "force_identifier")
        point = _columns(xml, el, data, xml.text(el, "point_identifier", ""), "point_identifier")
        torque = _columns(xml, el, data, xml.text(el, "torque_identifier", ""), "torque_identifier")
        if force is None and torque is None:
            xml.fail(el, "neither <force_identifier> nor <torque_identifier> is given; name the data columns.")
        if point is not None and force is None:  # else the point would be dropped silently
            xml.fail(el, "<point_identifier> is given but no <force_identifier>: a point of application "
                         "without a force applies nothing; name the force columns or leave the point out.")
        try:
            forces.append(ExternalForce(name, body, data.time, force, point if force is not None else None,
                                        torque, force_frame, point_frame))
        except ValueError as exc:
            raise ModelError(f"{xml.where(el)}: {exc}") from None
    return tuple(forces)
