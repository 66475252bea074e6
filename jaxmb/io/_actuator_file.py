"""OpenSim actuator files: a ``<ForceSet>`` of reserve and residual actuators.

The Static Optimization, CMC and RRA tools append such a file (``<force_set_files>`` of
their setup, ``replace_force_set`` false) to the model's ForceSet. jaxmb reads its
CoordinateActuator, PointActuator and TorqueActuator elements with the model importer's
reader (`jaxmb.io._osim_actuators`), so that a name the model lacks gets the same error,
with the file and line.
"""

from __future__ import annotations

import os

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
    [`jaxmb.TorqueActuator`][jaxmb.TorqueActuator] in file order (disabled ones left out),
    for [`jaxmb.static_optimization`][jaxmb.static_optimization]'s `actuators_extra`.

    **Raises:**

    [`jaxmb.ModelError`][jaxmb.ModelError] naming the element and ``file:line`` for a
    coordinate or body the model lacks, or an element that is not one of these actuators.
    """
    xml = XmlReader.parse(path)
    root = xml.root
    forceset = root if root.tag == "ForceSet" else xml.child(root, "ForceSet")
    reader = _FileReader(xml)
    fr = _ForceReader.__new__(_ForceReader)
    fr.r, fr.xml, fr.model_el, fr.functions, fr.model = reader, xml, None, {}, model
    fr.rotational, fr.bodies = {}, ("ground",) + tuple(model.body_names)
    out = []
    objects = xml.child(forceset, "objects", required=False)  # <defaults> (templates) are not read
    for el in [] if objects is None else xml.children(objects):
        if el.tag not in _ACTUATORS:
            xml.unsupported(el, "<ForceSet> of an actuator file", f"only {', '.join(_ACTUATORS)} are read")
        if not xml.boolean(el, "appliesForce", True) or xml.boolean(el, "isDisabled", False):
            continue
        actuator = fr.read(el)
        actuator.check_model(model)
        out.append(actuator)
    return tuple(out)
