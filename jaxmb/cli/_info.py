"""``jaxmb info MODEL``: what a model holds, as jaxmb reads it.

Coordinates with their units and ranges, the coordinates the importer eliminated,
bodies and their masses, muscles, wrap objects, the other forces and what the importer skipped.
"""

from __future__ import annotations

import math
import pathlib
import warnings

from ._errors import CommandError
from ._paths import BUILT_IN_MODELS, chain_links, check_model_file


def _num(x: float) -> str:
    return "inf" if math.isinf(x) and x > 0 else "-inf" if math.isinf(x) else f"{x:.6g}"


def _built_in(name: str, n: int):
    import jaxmb as mb

    return {"double-pendulum": mb.models.double_pendulum, "three-link-arm": mb.models.three_link_arm,
            "planar-chain": lambda: mb.models.planar_chain(n)}[name]()


def _load(path: str):
    """(model, eliminated coordinates [(name, kind)], importer notes) of an .osim file."""
    import jaxmb as mb

    if not pathlib.Path(path).suffix and not pathlib.Path(path).exists():
        raise CommandError(f"{path}: no such model file; built-in models: {', '.join(BUILT_IN_MODELS)}")
    file = check_model_file(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        imported = mb.io.read_osim(file)
    eliminated = [(c.name, c.kind) for c in imported.coordinates if c.kind != "independent"]
    notes = [" ".join(str(w.message).split()) for w in caught]
    return imported.model, eliminated, notes


def _coordinates(model, units) -> list[str]:
    import numpy as np

    lines = []
    width = max((len(c) for c in model.coordinate_names), default=4)
    lower, upper, default = (np.asarray(a, dtype=float) for a in (model.q_lower, model.q_upper, model.q_default))
    for k, (name, unit) in enumerate(zip(model.coordinate_names, units)):
        text = f"  {name:<{width}}  {unit:<3}  default {_num(default[k]):>9}  range [{_num(lower[k])}, {_num(upper[k])}]"
        if unit == "rad" and np.isfinite(lower[k]) and np.isfinite(upper[k]):
            text += f"  ([{np.degrees(lower[k]):.4g}, {np.degrees(upper[k]):.4g}] deg)"
        lines.append(text)
    return lines


def _bodies(model) -> list[str]:
    real = [b for b in model.bodies if not b.massless]
    virtual = len(model.bodies) - len(real)
    total = sum(float(b.mass) for b in real)
    head = f"bodies: {len(real)}, total mass {total:.6g} kg"
    if virtual:
        head += (f" (and {virtual} massless link{'s' if virtual != 1 else ''} between the axes of multi-axis "
                 "joints, not listed)")
    width = max((len(b.name) for b in real), default=4)
    return [head] + [f"  {b.name:<{width}}  {float(b.mass):.6g} kg" for b in real]


def _muscles(model) -> list[str]:
    if not model.muscles:
        return ["muscles: none"]
    width = max(len(m.name) for m in model.muscles)
    lines = [f"muscles: {len(model.muscles)}"]
    for m in model.muscles:
        p = m.parameters
        wraps = f", wraps {', '.join(w.name for w in m.wraps)}" if m.wraps else ""
        path = f"{len(m.points)} path points{wraps}"
        if m.path is not None:
            f = m.path.length_function
            path = f"path a polynomial of order {f.order} in {f.dimension} coordinates"
        lines.append(f"  {m.name:<{width}}  {m.kind}: F_max {float(p.max_isometric_force):.6g} N, "
                     f"l_opt {float(p.optimal_fiber_length):.4g} m, l_slack {float(p.tendon_slack_length):.4g} m, "
                     f"{path}")
    return lines


def _wraps(model) -> list[str]:
    used: dict[tuple[str, str], tuple[object, list[str]]] = {}
    for m in model.muscles:
        for w in m.wraps:
            used.setdefault((w.name, w.body), (w, []))[1].append(m.name)
    if not used:
        return ["wrap objects: none"]
    lines = [f"wrap objects: {len(used)}"]
    for (name, body), (w, muscles) in used.items():
        # The class name is for display only.
        lines.append(f"  {name} ({type(w).__name__} on {body}), used by {len(muscles)} muscle"
                     f"{'s' if len(muscles) != 1 else ''}: {', '.join(muscles)}")
    return lines


def _forces(model) -> list[str]:
    from .._forces import actuator_names

    if not model.forces:
        return ["other forces: none"]
    width = max(len(f.name) for f in model.forces)
    lines = [f"other forces: {len(model.forces)} (actuators in control order: "
             f"{', '.join(actuator_names(model)) or 'none'})"]
    # The class name is for display only.
    lines += [f"  {f.name:<{width}}  {type(f).__name__}" + (f" on {f.coordinate}" if hasattr(f, "coordinate") else "")
              for f in model.forces]
    return lines


def describe(model, source: str, eliminated=(), notes=None) -> str:
    """The text ``jaxmb info`` prints for `model` (read from `source`)."""
    from ..io._report import coordinate_units

    units = coordinate_units(model)
    lines = [f"{source}: model {model.name!r}, {model.nq} coordinates in q, {len(model.joints)} joints, "
             f"gravity {[float(g) for g in model.gravity]} m/s^2",
             f"coordinates (q, in this order; angles in rad, lengths in m): {model.nq}"]
    lines += _coordinates(model, units)
    if eliminated:
        lines.append(f"coordinates eliminated from q: {len(eliminated)}")
        lines += [f"  {name}  {kind}" + (" (a function of q)" if kind == "dependent" else " (held at its default)")
                  for name, kind in eliminated]
    lines += _bodies(model) + _muscles(model) + _wraps(model) + _forces(model)
    if notes is not None:
        lines.append(f"skipped or noted by the importer: {len(notes) or 'nothing'}")
        lines += [f"  - {note}" for note in notes]
        lines.append("  (never read, since they do not change the dynamics: visual geometry, markers, probes, "
                     "credits, disabled couplers)")
    return "\n".join(lines)


def info(args) -> int:
    import jax

    jax.config.update("jax_enable_x64", True)
    if args.model in BUILT_IN_MODELS:
        model = _built_in(args.model, chain_links(args))
        print(describe(model, f"built-in {args.model}"))
        return 0
    model, eliminated, notes = _load(args.model)
    print(describe(model, args.model, eliminated, notes))
    return 0
