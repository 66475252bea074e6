"""Muscle geometry against OpenSim: all muscle lengths and the moment-arm matrix
R = -dL/dq (nq x n_muscles) per state, `mb.muscle_lengths_and_moment_arms` (one
resolution of the paths), single states and batches, compile time apart, for several
models in one run.

OpenSim's cost for the same work is measured in the same run, at the same random
in-range states, when a Python with OpenSim is given (``--opensim-python`` or
``$JAXMB_OPENSIM_PYTHON``; ``pip install opensim`` into a separate venv), by
`benchmarks/_opensim_muscles.py`, on two routes an OpenSim user would take:
``Muscle.computeMomentArm`` for every muscle and coordinate, and central differences of
``Muscle.getLength`` (2 nq + 1 realizations). Without OpenSim, the computeMomentArm
figure stored in the model's reference file (tests/data/opensim/, at that file's own
states) is used where there is one, and the result says so.

Batches run under ``jax.vmap`` and ``jax.lax.map`` on a CPU, under ``jax.vmap`` alone on an
accelerator (``lax.map`` maps one state after another there).

Models: MoBL-ARMS (50 muscles, 7 coordinates; its first compile takes about a minute)
and gait2354 (54 muscles, 23 coordinates) by default, arm26 (6 muscles, 2 coordinates;
single states only) with ``--quick``; any ``.osim`` path too, for instance
RajagopalLaiUhlrich2023 from the opensim-models repository
(Models/Rajagopal/RajagopalLaiUhlrich2023.osim).

    python benchmarks/bench_muscles.py [--quick] [--models mobl_arms,gait2354,PATH.osim]
                                       [--batch-sizes 16,256] [--states 20] [--opensim-python PY]
                                       [--wrap-geometry converged,opensim]
                                       [--sections geometry,static_optimization]

``--wrap-geometry converged,opensim`` times both of `load_osim`'s wrap geometries in the
same run (the converged points, `load_osim`'s default, and OpenSim's iterates:
docs/opensim-parity.md); ``fitted`` (in the default run) times the default paths fitted
by polynomials of the coordinates (`mb.fit_function_paths` in the central half of the
ranges, its errors in the notes) against OpenSim 4.6 evaluating the same polynomials
(FunctionBasedPath, the path set written by `mb.io.write_function_paths`). ``--moment-arms closed_form,frozen_path`` times both of
`muscle_lengths_and_moment_arms`'s definitions of R: ``-dL/dq`` (the default, the quantity
of OpenSim's central differences) and the frozen path (the quantity of OpenSim's
computeMomentArm).

A second section, ``static_optimization`` (`benchmarks/_static_optimization.py`), times
what the geometry is for: OpenSim's Static Optimization tool on gait2392's walk (91
frames, 92 muscles, ground reactions, residual actuators; arm26's motion with
``--quick``) against jaxmb's `static_optimization` and scipy's SLSQP frame by frame;
``--frozen-path`` adds jaxmb on OpenSim's own problem (its wrap iterates, the frozen path).

    python benchmarks/bench_muscles.py --sections static_optimization [--frozen-path]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import _harness as H  # noqa: E402  (sets XLA flags and x64 before jax)

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmb as mb  # noqa: E402
from benchmarks import _static_optimization  # noqa: E402

DATA = H.ROOT / "tests" / "data" / "opensim"
# The headline names the other geometries; this one is what a user gets.
DEFAULT_GEOMETRY = inspect.signature(mb.load_osim).parameters["wrap_geometry"].default
DEFAULT_METHOD = inspect.signature(mb.muscle_lengths_and_moment_arms).parameters["method"].default
MODELS = {"mobl_arms": H.ROOT.parent / "shared" / "models" / "MOBL_ARMS_fixed_41.osim",
          "gait2354": H.ROOT / "jaxmb" / "data" / "gait2354_simbody.osim",
          "arm26": H.ROOT / "jaxmb" / "data" / "arm26.osim"}
ROUTES = ("compute_moment_arm", "central_differences")
SECTIONS = ("geometry", "static_optimization")


def model_path(model: str) -> tuple[str, Path]:
    """``(name, path)`` of a model given by name (`MODELS`) or by its ``.osim`` path."""
    if model in MODELS:
        return model, MODELS[model]
    path = Path(model)
    if path.suffix != ".osim":
        raise SystemExit(f"bench_muscles: {model!r} is neither one of {sorted(MODELS)} nor an .osim path")
    # A copy of a named model's file (on a machine without ../shared) keeps its name and stored figure.
    return next((name for name, known in MODELS.items() if known.name == path.name), path.stem), path


def random_states(model, n: int, seed: int = 0) -> np.ndarray:
    """`n` states uniform in the coordinates' ranges (an unbounded coordinate in ±π)."""
    lo = np.where(np.isfinite(model.q_lower), model.q_lower, -np.pi)
    hi = np.where(np.isfinite(model.q_upper), model.q_upper, np.pi)
    return np.random.default_rng(seed).uniform(lo, hi, (n, model.nq))


def opensim_seconds(python, path, model, states, repeats, fitted=None) -> dict:
    """OpenSim's ``{route: {"wall_s_per_state", "cpu_s_per_state"}}`` at `states`, measured now;
    with `fitted` (a model of function-based paths), on the model with those paths."""
    with tempfile.TemporaryDirectory() as tmp:
        st, out, paths = Path(tmp) / "states.npz", Path(tmp) / "out.json", Path(tmp) / "paths.xml"
        np.savez(st, coordinate_names=np.array(model.coordinate_names), q=np.asarray(states))
        extra = []
        if fitted is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the import's notes on the file, reported when it was loaded
                coordinates = mb.io.read_osim(str(path), muscles=False).coordinates
            mb.io.write_function_paths(fitted, paths, coordinates)
            extra = ["--function-paths", str(paths)]
        subprocess.run([python, str(H.ROOT / "benchmarks" / "_opensim_muscles.py"), str(path), str(st), str(out),
                        "--repeats", str(repeats), *extra], check=True, capture_output=True)
        return json.loads(out.read_text())


FITTED = "fitted"  # a "wrap geometry" of this benchmark: the default paths fitted by polynomials


def fitted_paths(m, notes, name, samples=800, max_order=6):
    """`m`'s paths fitted by `mb.fit_function_paths` at `samples` random states in the central
    half of every coordinate's range, with a note of the fit's errors there and at 100
    other states of that region (against the paths it was fitted to): ``(fitted model,
    {"median_mm", "p99_mm"})``, the length errors at those other states."""
    lo, hi = m.q_lower, m.q_upper
    lo, hi = np.where(np.isfinite(lo), lo, -np.pi), np.where(np.isfinite(hi), hi, np.pi)
    rng = np.random.default_rng(1)
    region = lambda n: 0.5 * (lo + hi) + 0.25 * (hi - lo) * rng.uniform(-1.0, 1.0, (n, m.nq))  # noqa: E731
    fit = mb.fit_function_paths(m, region(samples), max_order=max_order)
    held = jnp.asarray(region(100))
    both = eqx.filter_jit(jax.vmap(lambda model, x: mb.muscle_lengths(model, x), (None, 0)))
    error = np.abs(np.asarray(both(fit.model, held)) - np.asarray(both(m, held)))
    # Where mb.path_status passes the geometric path: the fit against paths that resolved.
    ok = np.asarray(eqx.filter_jit(jax.vmap(lambda model, x: mb.path_status(model, x).ok, (None, 0)))(m, held))
    worst = int(np.argmax(np.where(ok, error, 0.0).max(axis=0)))
    notes.append(f"{name}, fitted paths: mb.fit_function_paths at {samples} random states in the central half of each "
                 f"coordinate's range (orders {min(fit.orders)}-{max(fit.orders)}; {int(fit.outliers.sum())} samples "
                 f"left out as outliers); RMS length error over the samples "
                 f"median {1e3 * np.median(fit.length_rms):.3g} mm, largest {1e3 * fit.length_rms.max():.3g} mm "
                 f"({m.muscle_names[int(np.argmax(fit.length_rms))]}); at 100 other states of that region median "
                 f"{1e3 * np.median(error):.3g} mm, 90th percentile {1e3 * np.percentile(error, 90):.3g} mm, 99th "
                 f"percentile {1e3 * np.percentile(error, 99):.3g} mm; where path_status passes the geometric path "
                 f"({ok.sum()} of {ok.size} muscle-states) median {1e3 * np.median(error[ok]):.3g} mm, 90th percentile "
                 f"{1e3 * np.percentile(error[ok], 90):.3g} mm, 99th percentile {1e3 * np.percentile(error[ok], 99):.3g} mm, "
                 f"largest {1e3 * error[ok].max():.3g} mm ({m.muscle_names[worst]}); "
                 "OpenSim's figures for these rows are OpenSim 4.6 on the same polynomials (FunctionBasedPath)")
    return fit.model, dict(median_mm=1e3 * float(np.median(error)), p99_mm=1e3 * float(np.percentile(error, 99)))


def stored_opensim(name: str) -> dict | None:
    """The computeMomentArm figure stored in the model's reference file, if it has one."""
    ref = DATA / f"{name}.npz"
    if not ref.exists():
        return None
    d = np.load(ref)
    return {"compute_moment_arm": {"wall_s_per_state": float(d["opensim_seconds_per_state_lengths_and_moment_arms"]),
                                   "cpu_s_per_state": float(d["opensim_cpu_seconds_per_state_lengths_and_moment_arms"])},
            "source": f"stored in {ref.name} when it was generated, at its own states (no OpenSim given)"}


def one_model(model: str, batch_sizes, muscles, n_states, rounds, opensim_python, notes, geometries=(DEFAULT_GEOMETRY,),
              methods=(DEFAULT_METHOD,)):
    """Rows of one model (for each wrap geometry of `load_osim` and each definition of R) and its summary."""
    name, path = model_path(model)
    calls, compile_s, per, fitted, fit_error = {}, {}, {}, None, None
    for geometry in geometries:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = mb.load_osim(str(path), wrap_geometry=DEFAULT_GEOMETRY if geometry == FITTED else geometry)
        if muscles:  # a subset (a smaller program to compile)
            m = eqx.tree_at(lambda x: x.muscles, m, tuple(x for x in m.muscles if x.name in muscles))
        if geometry == FITTED:
            m, fit_error = fitted_paths(m, notes, name)
            fitted = m
        states = random_states(m, n_states)
        for method in methods:
            fn = lambda q, m=m, method=method: mb.muscle_lengths_and_moment_arms(m, q, method=method)  # noqa: E731
            qs1 = jnp.asarray(states)
            single, lo, co = H.compile_apart(fn, qs1[0])
            calls[(geometry, method, "jit", 1)] = lambda single=single, qs1=qs1: [single(q) for q in qs1]
            compile_s[(geometry, method, "jit", 1)], per[(geometry, method, "jit", 1)] = lo + co, len(states)
            for b in batch_sizes:
                qs = jnp.asarray(np.resize(states, (b, m.nq)))
                hows = {"vmap": jax.vmap(fn)}
                if H.clock() == "cpu":  # on an accelerator lax.map runs one state after another
                    hows["lax.map"] = lambda x, fn=fn: jax.lax.map(fn, x)
                for how, f in hows.items():
                    comp, lo, co = H.compile_apart(f, qs)
                    calls[(geometry, method, how, b)] = lambda comp=comp, qs=qs: comp(qs)
                    compile_s[(geometry, method, how, b)], per[(geometry, method, how, b)] = lo + co, b
    if batch_sizes and H.clock() != "cpu":
        notes.append(f"{name}: batches under vmap only (lax.map, one state after another, leaves an accelerator idle)")
    if muscles:
        notes.append(f"{name}: only the muscles {list(muscles)}; OpenSim's figures are for all of the model's muscles")
    timed = H.time_calls(calls, rounds=rounds, min_time=0.0)
    key = f"{H.clock()}_s_per_state"
    osims = {}  # OpenSim on the same paths: the geometric ones, and the fitted ones if timed
    for kind in ([] if set(geometries) <= {FITTED} else ["geometric"]) + ([FITTED] if fitted is not None else []):
        if opensim_python:
            osim = opensim_seconds(opensim_python, path, m, states, rounds, fitted=fitted if kind == FITTED else None)
            osim["source"] = f"measured in this run at the same states ({opensim_python})"
        elif kind == "geometric":
            osim = stored_opensim(name) or {"source": "no OpenSim given (--opensim-python) and no stored figure"}
        else:
            osim = {"source": "no OpenSim given (--opensim-python)"}
        osims[kind] = (osim, {r: osim[r][key] for r in ROUTES if r in osim})
        label = "" if kind == "geometric" else " with the fitted paths (FunctionBasedPath)"
        notes.append(f"{name}: OpenSim{label} " + ", ".join(
            f"{r} {H.ms(osim[r]['wall_s_per_state']):.4g} ms/state wall, {H.ms(osim[r]['cpu_s_per_state']):.4g} ms CPU"
            for r in osims[kind][1]) + ("" if osims[kind][1] else "not timed") + f" ({osim['source']})")
    rows = []
    for k in calls:
        seconds, wall = timed[k]["best_s"] / per[k], timed[k]["best_wall_s"] / per[k]
        osim, osim_s = osims[FITTED if k[0] == FITTED else "geometric"]
        rows.append(dict(model=name, wraps=k[0], moment_arms=k[1], how=k[2], batch=k[3], compile_s=compile_s[k],
                         ms_per_state=H.ms(seconds), ms_per_state_wall=H.ms(wall),
                         **{f"{r}_over_this": s / seconds for r, s in osim_s.items()},
                         **{f"{r}_over_this_wall": osim[r]["wall_s_per_state"] / wall for r in osim_s}))
    summary = dict(model=name, file=path.name, n_muscles=len(m.muscles), nq=int(m.nq),
                   opensim_seconds_per_state={kind: seconds for kind, (_, seconds) in osims.items()},
                   opensim_source={kind: osim["source"] for kind, (osim, _) in osims.items()}, fit_error=fit_error)
    return rows, summary


def run(quick=False, models=None, batch_sizes=None, muscles=None, opensim_python=None, rounds=None, n_states=None,
        out_dir=H.RESULTS, geometries=None, methods=(DEFAULT_METHOD,), sections=SECTIONS, frozen_path=False):
    """Both sections (or those named in `sections`) in one result, ``muscles``: the geometry's
    rows at the top level, static optimization's under ``"static_optimization"``
    (`frozen_path` adds jaxmb on OpenSim's problem there). `geometries` default: load_osim's,
    and the paths fitted by polynomials unless `quick`."""
    sections = H.sections(sections, SECTIONS)
    geometries = geometries or ((DEFAULT_GEOMETRY,) if quick else (DEFAULT_GEOMETRY, FITTED))
    opensim_python = opensim_python if opensim_python is not None else os.environ.get("JAXMB_OPENSIM_PYTHON", "")
    result, tables = {"rows": [], "notes": [], "headline": []}, []
    meta = dict(quick=quick, sections=list(sections))
    if "geometry" in sections:
        geometry, table, extra = _geometry(quick, models, batch_sizes, muscles, opensim_python, rounds, n_states,
                                           geometries, methods)
        result.update(geometry)
        meta.update(extra)
        tables.append(table)
    if "static_optimization" in sections:
        so = _static_optimization.section(quick=quick, opensim_python=opensim_python, rounds=rounds,
                                          frozen_path=frozen_path)
        H.add_section(result, tables, "static_optimization", so,
                      f"Static optimization ({so['meta']['model']}, {so['meta']['frames']} frames)")
    result["meta"] = H.meta("muscles", **meta)
    return H.write(result, out_dir, "\n\n".join(tables))


def _geometry(quick, models, batch_sizes, muscles, opensim_python, rounds, n_states, geometries, methods):
    """The geometry section: (its rows, notes and headline rows; its table; meta entries)."""
    models = tuple(models) if models else (("arm26",) if quick else ("mobl_arms", "gait2354"))
    # Batches compile for minutes even on arm26 (every wrap's iterations under vmap): not in --quick.
    batch_sizes = batch_sizes if batch_sizes is not None else (() if quick else (16, 256))
    rounds = rounds or (3 if quick else 5)
    n_states = n_states or (8 if quick else 20)
    notes, rows, summaries = [], [], []
    for model in models:
        r, s = one_model(model, batch_sizes, muscles, n_states, rounds, opensim_python, notes, geometries, methods)
        rows += r
        summaries.append(s)
    table = H.markdown_table(rows, [("model", "model"), ("wraps", "wrap geometry"), ("moment_arms", "R"),
                                    ("how", "how"), ("batch", "batch"),
                                    ("compile_s", "compile s"), ("ms_per_state", "ms/state"),
                                    ("ms_per_state_wall", "ms/state wall"),
                                    ("compute_moment_arm_over_this", "OpenSim computeMomentArm / jaxmb"),
                                    ("central_differences_over_this", "OpenSim central differences / jaxmb"),
                                    ("central_differences_over_this_wall", "the same, wall-clock")])
    return ({"rows": rows, "notes": notes, "headline": headline(rows, summaries)}, table,
            dict(batch_sizes=list(batch_sizes), rounds=rounds, states=n_states, models=summaries,
                 wrap_geometries=list(geometries), moment_arms=list(methods)))


def headline(rows, summaries):
    out = []
    for s in summaries:
        for geometry, method in dict.fromkeys((r["wraps"], r["moment_arms"]) for r in rows if r["model"] == s["model"]):
            osim = s["opensim_seconds_per_state"][FITTED if geometry == FITTED else "geometric"]
            alt = "; ".join(f"OpenSim 4.6 {r.replace('_', ' ')} {H.ms(t):.4g}" for r, t in osim.items())
            if geometry == FITTED:
                alt += " (OpenSim on the same polynomials: FunctionBasedPath)"
            mine = [r for r in rows if r["model"] == s["model"] and (r["wraps"], r["moment_arms"]) == (geometry, method)]
            best = min(mine, key=lambda r: r["ms_per_state"])
            jit = next(r for r in mine if r["how"] == "jit")
            if geometry == FITTED:
                e = s["fit_error"]
                wraps = (f" (paths fitted by polynomials, fit_function_paths: length error median "
                         f"{e['median_mm']:.2g} mm, 99th percentile {e['p99_mm']:.2g} mm at other states)")
            else:
                wraps = "" if geometry == DEFAULT_GEOMETRY else f" ({geometry} wrap geometry)"
            arms = "moment arms" if method == DEFAULT_METHOD else "frozen-path moment arms (OpenSim's computeMomentArm)"
            out.append({"what": f"{s['file']}: {s['n_muscles']} muscle lengths and the {s['nq']} x {s['n_muscles']} "
                                f"{arms}{wraps}, ms per state",
                        "jaxmb": f"{jit['ms_per_state']:.4g} single, {jit['ms_per_state_wall']:.4g} wall-clock "
                                 f"(compile {jit['compile_s']:.0f} s); best {best['ms_per_state']:.4g}, "
                                 f"{best['ms_per_state_wall']:.4g} wall-clock ({best['how']}, batch {best['batch']})",
                        "alternative": alt, "script": "bench_muscles.py"})
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="arm26, single states only; static optimization of arm26's motion")
    p.add_argument("--models", help=f"comma-separated names ({', '.join(MODELS)}) or .osim paths")
    p.add_argument("--batch-sizes", help="comma-separated; empty for single states only")
    p.add_argument("--states", type=int, help="random in-range states timed singly (default 20, 8 with --quick)")
    p.add_argument("--opensim-python", help="a Python with `opensim` (default: $JAXMB_OPENSIM_PYTHON)")
    p.add_argument("--wrap-geometry", default="",
                   help="comma-separated wrap geometries of load_osim to time side by side, for instance "
                        f"converged,opensim, and '{FITTED}': load_osim's paths fitted by polynomials "
                        f"(default: {DEFAULT_GEOMETRY},{FITTED}; {DEFAULT_GEOMETRY} with --quick)")
    p.add_argument("--moment-arms", default=DEFAULT_METHOD,
                   help="comma-separated definitions of R to time side by side: closed_form (-dL/dq, the "
                        "quantity of OpenSim's central differences) and frozen_path (OpenSim's computeMomentArm) "
                        f"(default: {DEFAULT_METHOD})")
    p.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    p.add_argument("--frozen-path", action="store_true",
                   help="static optimization: also jaxmb on OpenSim's problem (its wrap iterates, the frozen path)")
    p.add_argument("--out-dir", default=str(H.RESULTS))
    a = p.parse_args(argv)
    try:
        sections = H.sections(a.sections, SECTIONS)
    except ValueError as e:
        p.error(str(e))
    batches = None if a.batch_sizes is None else tuple(int(x) for x in a.batch_sizes.split(",") if x.strip())
    models = None if a.models is None else tuple(x for x in a.models.split(",") if x.strip())
    run(quick=a.quick, models=models, batch_sizes=batches, n_states=a.states, opensim_python=a.opensim_python,
        out_dir=a.out_dir, geometries=tuple(x for x in a.wrap_geometry.split(",") if x.strip()),
        methods=tuple(x for x in a.moment_arms.split(",") if x.strip()), sections=sections, frozen_path=a.frozen_path)


if __name__ == "__main__":
    main()
