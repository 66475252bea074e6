"""OpenSim tool setup files: the ``InverseDynamicsTool`` setup, as OpenSim reads it.

Paths inside a setup file are relative to the setup file's folder (OpenSim changes
to that folder while it runs a tool), or to its ``<input_directory>`` where one is given.
"""

from __future__ import annotations

import dataclasses
import math
import os

from ._xml import XmlReader

__all__ = ["InverseDynamicsSetup", "read_inverse_dynamics_setup", "StaticOptimizationSetup",
           "read_static_optimization_setup"]

_ID_TAGS = {"results_directory", "input_directory", "model_file", "time_range", "forces_to_exclude",
            "external_loads_file", "coordinates_file", "coordinates_in_degrees",
            "lowpass_cutoff_frequency_for_coordinates", "output_gen_force_file",
            "joints_to_report_body_forces", "output_body_forces_file"}


# OpenSim 4's AnalyzeTool and StaticOptimization properties (the integrator's and the optimizer's
# settings are read by OpenSim only; jaxmb solves every frame with its own solver).
_ANALYZE_TAGS = {"model_file", "replace_force_set", "force_set_files", "results_directory", "input_directory",
                 "output_precision", "initial_time", "final_time", "solve_for_equilibrium_for_auxiliary_states",
                 "maximum_number_of_integrator_steps", "maximum_integrator_step_size",
                 "minimum_integrator_step_size", "integrator_error_tolerance", "AnalysisSet", "ControllerSet",
                 "external_loads_file", "states_file", "coordinates_file", "speeds_file",
                 "lowpass_cutoff_frequency_for_coordinates"}
_SO_TAGS = {"on", "in_degrees", "start_time", "end_time", "step_interval", "use_model_force_set",
            "activation_exponent", "use_muscle_physiology", "optimizer_convergence_criterion",
            "optimizer_max_iterations", "optimizer_algorithm"}


@dataclasses.dataclass(frozen=True)
class InverseDynamicsSetup:
    """What jaxmb takes from an ``InverseDynamicsTool`` setup file (paths made absolute)."""

    model_file: str
    coordinates_file: str
    external_loads_file: str | None
    lowpass_hz: float | None
    time_range: tuple[float, float] | None
    forces_to_exclude: tuple[str, ...]
    output_gen_force_file: str
    results_directory: str


def read_inverse_dynamics_setup(path: str | os.PathLike) -> InverseDynamicsSetup:
    """Read an OpenSim ``InverseDynamicsTool`` setup file; a
    [`jaxmb.ModelError`][jaxmb.ModelError] names ``file:line`` for a missing model or
    coordinates file and for settings jaxmb does not support."""
    xml = XmlReader.parse(path)
    root = xml.root
    tool = root if root.tag == "InverseDynamicsTool" else xml.child(root, "InverseDynamicsTool")
    xml.check_children(tool, _ID_TAGS, "<InverseDynamicsTool>")
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    inputs = xml.text(tool, "input_directory", "")
    base = os.path.join(folder, inputs) if inputs else folder

    def file(tag, required):
        name = xml.text(tool, tag, "")
        if not name or name == "Unassigned":
            if required:
                xml.fail(tool, f"<{tag}> is empty; name the file (relative to {base}).")
            return None
        full = os.path.normpath(os.path.join(base, name))
        if not os.path.isfile(full):
            xml.fail(xml.child(tool, tag), f"file {name!r} not found (looked for {full}); paths in a setup file "
                                           "are relative to its folder.", owner=tool)
        return full

    joints = xml.text(tool, "joints_to_report_body_forces", "")
    if joints:
        xml.fail(xml.child(tool, "joints_to_report_body_forces"), "jaxmb does not report joint body forces; "
                 "leave <joints_to_report_body_forces> empty.", owner=tool)
    cutoff = xml.number(tool, "lowpass_cutoff_frequency_for_coordinates", -1.0)
    time_range = _time_range(xml, tool)
    xml.boolean(tool, "coordinates_in_degrees", True)  # the motion file's own header says its units
    excluded = tuple(xml.text(tool, "forces_to_exclude", "Muscles").split())
    output = xml.text(tool, "output_gen_force_file", "") or "inverse_dynamics.sto"
    if os.path.basename(output) != output or output in (".", ".."):  # else it is written outside the results
        xml.fail(xml.child(tool, "output_gen_force_file"), f"{output!r} is not a file name: the file goes into "
                 "the results folder (the command's --out); write a name without folders.", owner=tool)
    return InverseDynamicsSetup(
        model_file=file("model_file", True), coordinates_file=file("coordinates_file", True),
        external_loads_file=file("external_loads_file", False),
        lowpass_hz=None if cutoff < 0 else float(cutoff), time_range=time_range, forces_to_exclude=excluded,
        output_gen_force_file=output,
        results_directory=os.path.join(folder, xml.text(tool, "results_directory", "") or "."))


def _time_range(xml: XmlReader, tool) -> tuple[float, float] | None:
    """``<time_range>`` (two numbers; ``inf`` allowed), or None where absent or unbounded."""
    text = xml.text(tool, "time_range", "")
    if not text:
        return None
    try:
        lo, hi = (float(v) for v in text.split())
    except ValueError:
        lo = hi = math.nan
    if math.isnan(lo) or math.isnan(hi):
        xml.fail(xml.child(tool, "time_range"), f"expected two numbers (start end), got {text!r}.", owner=tool)
    if math.isinf(lo) and math.isinf(hi):
        return None
    return (lo, hi)


@dataclasses.dataclass(frozen=True)
class StaticOptimizationSetup:
    """What jaxmb takes from an ``AnalyzeTool`` setup with a ``StaticOptimization`` analysis
    (paths made absolute)."""

    name: str
    model_file: str
    coordinates_file: str
    external_loads_file: str | None
    force_set_files: tuple[str, ...]
    replace_force_set: bool
    lowpass_hz: float | None
    time_range: tuple[float, float] | None
    exponent: float
    use_model_force_set: bool
    results_directory: str


def read_static_optimization_setup(path: str | os.PathLike) -> StaticOptimizationSetup:
    """Read an OpenSim ``AnalyzeTool`` setup file holding a ``StaticOptimization`` analysis;
    a [`jaxmb.ModelError`][jaxmb.ModelError] names ``file:line`` for a missing file and for
    settings jaxmb does not support (a states file, ``use_muscle_physiology`` false, a
    ``step_interval`` other than 1, no StaticOptimization analysis)."""
    xml = XmlReader.parse(path)
    root = xml.root
    tool = root if root.tag == "AnalyzeTool" else xml.child(root, "AnalyzeTool")
    xml.check_children(tool, _ANALYZE_TAGS, "<AnalyzeTool>", skip=("defaults",))
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    inputs = xml.text(tool, "input_directory", "")
    base = os.path.join(folder, inputs) if inputs else folder

    def file(name, el, tag):
        full = os.path.normpath(os.path.join(base, name))
        if not os.path.isfile(full):
            xml.fail(xml.child(el, tag), f"file {name!r} not found (looked for {full}); paths in a setup file "
                                         "are relative to its folder.", owner=el)
        return full

    def required(tag):
        name = xml.text(tool, tag, "")
        if not name or name == "Unassigned":
            xml.fail(tool, f"<{tag}> is empty; name the file (relative to {base}).")
        return file(name, tool, tag)

    for tag, what in (("states_file", "states"), ("speeds_file", "speeds (it differentiates the coordinates)")):
        given = xml.text(tool, tag, "")
        if given and given != "Unassigned":
            xml.fail(xml.child(tool, tag), f"jaxmb reads coordinates, not {what}: give <coordinates_file> "
                     f"and leave <{tag}> empty.", owner=tool)
    analyses = xml.child(tool, "AnalysisSet", required=False)
    so = [el for el in xml.set_objects(analyses) if el.tag == "StaticOptimization"] if analyses is not None else []
    so = [el for el in so if xml.boolean(el, "on", True)]
    if not so:
        xml.fail(tool, "holds no StaticOptimization analysis (switched on) in its <AnalysisSet>.")
    if len(so) > 1:
        xml.fail(so[1], f"a second StaticOptimization switched on (the first: {xml.where(so[0])}); jaxmb "
                 "runs one: set <on> false in the other.", owner=tool)
    analysis = so[0]
    xml.check_children(analysis, _SO_TAGS, "<StaticOptimization>")
    if not xml.boolean(analysis, "use_muscle_physiology", True):
        xml.fail(xml.child(analysis, "use_muscle_physiology"), "jaxmb's static optimization uses the muscles' "
                 "force-length-velocity curves; set <use_muscle_physiology> true.", owner=analysis)
    interval = xml.number(analysis, "step_interval", 1.0)
    if interval != 1:
        xml.fail(xml.child(analysis, "step_interval"), f"step_interval {interval:g}: jaxmb solves every frame; "
                 "set <step_interval> to 1.", owner=analysis)
    external = xml.text(tool, "external_loads_file", "")
    forces = tuple(file(name, tool, "force_set_files") for name in xml.text(tool, "force_set_files", "").split())
    cutoff = xml.number(tool, "lowpass_cutoff_frequency_for_coordinates", -1.0)
    def time(el, tag, default):
        text = xml.text(el, tag, "")
        try:
            value = float(text) if text else default
        except ValueError:
            value = math.nan
        if math.isnan(value):
            xml.fail(xml.child(el, tag), f"expected a time (s), got {text!r}.", owner=el)
        return value

    start = max(time(tool, "initial_time", -math.inf), time(analysis, "start_time", -math.inf))
    end = min(time(tool, "final_time", math.inf), time(analysis, "end_time", math.inf))
    return StaticOptimizationSetup(
        name=tool.get("name") or "Untitled", model_file=required("model_file"),
        coordinates_file=required("coordinates_file"),
        external_loads_file=file(external, tool, "external_loads_file") if external and external != "Unassigned"
        else None, force_set_files=forces, replace_force_set=xml.boolean(tool, "replace_force_set", False),
        lowpass_hz=None if cutoff < 0 else float(cutoff),
        time_range=None if math.isinf(start) and math.isinf(end) else (start, end),
        exponent=xml.number(analysis, "activation_exponent", 2.0),
        use_model_force_set=xml.boolean(analysis, "use_model_force_set", True),
        results_directory=os.path.join(folder, xml.text(tool, "results_directory", "") or "."))
