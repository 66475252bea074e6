"""OpenSim actuator files: a ``<ForceSet>`` of reserve and residual actuators.

The Static Optimization, CMC and RRA tools append such a file (``<force_set_files>`` of
their setup, ``replace_force_set`` false) to the model's ForceSet. jaxmb reads its
CoordinateActuator, PointActuator and TorqueActuator elements with the model importer's
reader (`jaxmb.io._osim_actuators`), so that a name the model lacks gets the same error,
with the file and line.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET

from .._model import Model
from ._osim_actuators import _ForceReader
from ._xml import XmlReader

__all__ = ["read_actuators"]

_ACTUATORS = ("CoordinateActuator", "PointActuator", "TorqueActuator")


class _FileReader:
    """The importer's reading interface over one XML file (its ``xml`` and its methods)."""

    def __init__(self, xml: XmlReader):
        self.xml = xml

    def __getattr__(self, name):
        return getattr(self.xml, name)


def read_actuators(path: str | os.PathLike, model: Model) -> tuple:
    """Read the actuators of an OpenSim ``<ForceSet>`` file (reserves and residuals).

    **Arguments:**

    - `path`: the ``.xml`` file (root ``<ForceSet>``, in an ``<OpenSimDocument>`` or not).
    - `model`: the model they act on: every coordinate and body they name is checked.

    **Returns:**

    A tuple of [`jaxmb.CoordinateActuator`][jaxmb.CoordinateActuator],
    [`jaxmb.PointActuator`][jaxmb.PointActuator] and
    [`jaxmb.TorqueActuator`][jaxmb.TorqueActuator] in file order (disabled ones left out;
    a property an actuator leaves out is its ``<defaults>`` template's, as in OpenSim),
    for [`jaxmb.static_optimization`][jaxmb.static_optimization]'s `actuators_extra`.

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] naming the element and ``file:line`` for a
    coordinate or body the model lacks, an element that is not one of these actuators, a
    tag an actuator does not have (a misspelling would leave its default), a NaN control
    bound, or a torque actuator between a body and itself; ``TypeError`` where `model` is
    not a `jaxmb.Model`.
    """
    if not isinstance(model, Model):
        raise TypeError(f"read_actuators: model must be the jaxmb.Model the actuators act on, got "
                        f"{type(model).__name__}.")
    xml = XmlReader.parse(path)
    root = xml.root
    forceset = root if root.tag == "ForceSet" else xml.child(root, "ForceSet")
    reader = _FileReader(xml)
    fr = _ForceReader.__new__(_ForceReader)
    fr.r, fr.xml, fr.model_el, fr.functions, fr.model = reader, xml, None, {}, model
    fr.rotational, fr.bodies = {}, ("ground",) + tuple(model.body_names)
    out = []
    objects = xml.child(forceset, "objects", required=False)
    defaults = xml.child(forceset, "defaults", required=False)
    templates = {} if defaults is None else {t.tag: t for t in xml.children(defaults)}
    for el in [] if objects is None else xml.children(objects):
        if el.tag not in _ACTUATORS:
            xml.unsupported(el, "<ForceSet> of an actuator file", f"only {', '.join(_ACTUATORS)} are read")
        if el.tag in templates:
            el = _with_template(xml, el, templates[el.tag])
        if not xml.boolean(el, "appliesForce", True) or xml.boolean(el, "isDisabled", False):
            continue
        actuator = fr.read(el)
        actuator.check_model(model)
        out.append(actuator)
    return tuple(out)


def _with_template(xml: XmlReader, el, template):
    """`el` with the properties it leaves out taken from its ``<defaults>`` template, as
    OpenSim 4.6 reads the file (a template's ``<optimal_force>`` of 1000 is the optimal
    force of every actuator of its type that gives none). The children stay the file's
    elements, so that errors still name their lines."""
    merged = ET.Element(el.tag, el.attrib)
    merged.extend(list(el))
    given = {c.tag for c in el}
    merged.extend(c for c in template if c.tag not in given)
    xml.locations[merged] = xml.locations.get(el)
    return merged
