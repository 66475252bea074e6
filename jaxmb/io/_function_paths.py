"""Write a model's function-based muscle paths as an OpenSim path set: the
``Set_FunctionBasedPath_`` file that OpenSim's ``PolynomialPathFitter`` writes and
``ModOpReplacePathsWithFunctionBasedPaths`` reads, so that paths fitted by jaxmb
(`jaxmb.fit_function_paths`) serve OpenSim and Moco too."""

import os
import xml.etree.ElementTree as ET
from collections.abc import Sequence

import numpy as np

from .._errors import ModelError
from .._forces import Ligament
from .._functions import Coordinate
from .._model import Model
from ._osim import OsimCoordinate


def write_function_paths(model: Model, path: str | os.PathLike, coordinates: Sequence[OsimCoordinate]) -> None:
    """Write every [`jaxmb.FunctionBasedPath`][jaxmb.FunctionBasedPath] of `model`'s muscles
    and ligaments to `path` as an OpenSim 4.6 ``Set_FunctionBasedPath_`` document: one
    ``FunctionBasedPath`` named ``/forceset/<name>`` per path, its
    ``coordinate_paths`` and its ``MultivariatePolynomialFunction`` length (coefficients
    in OpenSim's order, written to round-trip in float64).

    **Arguments:**

    - `model`: a model whose function-based paths read independent coordinates
      (`jaxmb.Coordinate`), as `jaxmb.fit_function_paths` makes them.
    - `path`: the file to write.
    - `coordinates`: the OpenSim coordinates of the model's file
      (`jaxmb.io.read_osim(file).coordinates`), for their joints' component paths
      (``/jointset/<joint>/<coordinate>``).

    **Raises:** [`jaxmb.ModelError`][jaxmb.ModelError] for a model without function-based
    paths, or a path over a coordinate that is not an independent coordinate of
    `coordinates`.
    """
    if not isinstance(model, Model):  # (path, model, ...) swapped: an AttributeError on .forces
        raise TypeError(f"write_function_paths: model must be a jaxmb.Model (the arguments are model, path, "
                        f"coordinates), got {type(model).__name__}.")
    if hasattr(coordinates, "coordinates") and hasattr(coordinates, "model"):  # the import itself
        raise TypeError("write_function_paths: coordinates must be the import's .coordinates "
                        "(jaxmb.io.read_osim(file).coordinates), got the import itself.")
    if isinstance(coordinates, str) or not all(hasattr(c, "joint") and hasattr(c, "name") for c in coordinates):
        raise TypeError("write_function_paths: coordinates must be the OpenSim coordinates of the model's file, "
                        "jaxmb.io.read_osim(file).coordinates (each names its joint, which the written paths "
                        f"need), got {coordinates!r}.")
    joints = {c.name: c.joint for c in coordinates}
    root = ET.Element("OpenSimDocument", Version="40600")
    objects = ET.SubElement(ET.SubElement(root, "Set_FunctionBasedPath_"), "objects")
    ligament_paths = tuple(f.path for f in model.forces if isinstance(f, Ligament))
    for muscle in model.muscles + ligament_paths:
        if muscle.path is None:
            continue
        names = []
        for c in muscle.path.coordinates:
            name = model.coordinate_names[c.index] if isinstance(c, Coordinate) else None
            if name not in joints:
                raise ModelError(f"write_function_paths: path {muscle.name!r} reads a coordinate that is not an "
                                 "independent coordinate of the given OpenSim coordinates; write paths over "
                                 "jaxmb.Coordinate(k) of the model's own file.")
            names.append(f"/jointset/{joints[name]}/{name}")
        fbp = ET.SubElement(objects, "FunctionBasedPath", name=f"/forceset/{muscle.name}")
        ET.SubElement(fbp, "coordinate_paths").text = " ".join(names)
        poly = ET.SubElement(ET.SubElement(fbp, "length_function"), "MultivariatePolynomialFunction")
        f = muscle.path.length_function
        ET.SubElement(poly, "coefficients").text = " ".join(repr(float(a)) for a in np.asarray(f.coefficients))
        ET.SubElement(poly, "dimension").text = str(f.dimension)
        ET.SubElement(poly, "order").text = str(f.order)
    if not len(objects):
        raise ModelError(f"write_function_paths: model {model.name!r} has no function-based paths; fit them "
                         "with jaxmb.fit_function_paths.")
    ET.indent(root, "\t")
    ET.ElementTree(root).write(path, encoding="UTF-8", xml_declaration=True)
