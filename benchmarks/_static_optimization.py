"""Static optimization of gait2392's walk (OpenSim's Static Optimization tool): the
``static_optimization`` section of ``bench_muscles.py``.

    python benchmarks/bench_muscles.py --sections static_optimization [--quick] [--frozen-path]

gait2392 (``subject01_simbody.osim``, 92 muscles, 23 coordinates) walking from 0.5 to
2.0 s (91 frames), its ground reactions and 6 residual actuators, coordinates low-pass
filtered at 6 Hz: the setup ``tests/data/opensim/motion/subject01_Setup_StaticOptimization.xml``.
jaxmb's `static_optimization` (all frames batched; compile reported apart: first call minus
a warm one) against

- OpenSim 4.6's AnalyzeTool with its StaticOptimization analysis on the same setup: the
  process CPU time of the whole tool run, measured here with ``--opensim-python``
  (or ``$JAXMB_OPENSIM_PYTHON``), else the figure stored in
  ``tests/data/opensim/motion/static_optimization_timing.json`` by the reference generator;
- scipy's SLSQP frame by frame on jaxmb's own per-frame problems (the same ``B``, ``b``,
  bounds and cost), with the largest activation difference to jaxmb's.

``--quick`` runs arm26's tutorial motion (6 muscles, 121 frames) instead. ``--frozen-path``
adds jaxmb on OpenSim's own problem: the model read with OpenSim's wrap iterates
(``wrap_geometry="opensim"``) and the muscles pulling along their frozen paths
(``moment_arms="frozen_path"``, OpenSim's computeMomentArm), which only changes wrapped
paths (arm26's; gait2392 has none).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import warnings

from benchmarks import _harness as H  # sets XLA flags and x64 before jax

import jax
import numpy as np
from scipy.optimize import minimize

import jaxmb as mb

DATA = H.ROOT / "tests" / "data" / "opensim" / "motion"
CASES = {"gait2392": ("subject01_simbody.osim", "subject01_walk1_ik.mot", "subject01_walk1_grf.xml",
                      "gait2392_SO_Residual_Actuators.xml", (0.5, 2.0), "subject01_walk1"),
         "arm26": ("arm26.osim", "arm26_InverseKinematics.mot", None, None, (0.0, 1.0), "arm26")}


def opensim_cpu_seconds(python: str, case: str) -> float:
    """CPU seconds of OpenSim's AnalyzeTool on the case's setup, measured in a subprocess."""
    setup = "subject01_Setup_StaticOptimization.xml" if case == "gait2392" else "arm26_Setup_StaticOptimization.xml"
    code = ("import opensim as osim, os, shutil, tempfile, time, sys\n"
            "src = sys.argv[1]\n"
            "with tempfile.TemporaryDirectory() as tmp:\n"
            "    for f in os.listdir(src):\n"
            "        p = os.path.join(src, f)\n"
            "        os.path.isfile(p) and shutil.copy(p, tmp)\n"
            f"    tool = osim.AnalyzeTool(os.path.join(tmp, {setup!r}))\n"
            "    t = time.process_time(); tool.run(); print(time.process_time() - t)\n")
    out = subprocess.run([python, "-c", code, str(DATA)], capture_output=True, text=True, check=True).stdout
    return float(out.strip().splitlines()[-1])


def slsqp(B, b, lo, hi, p=2.0):
    """One frame by scipy's SLSQP from the bounds' midpoint (activations) or 0 (actuators)."""
    x0 = np.where(np.isfinite(lo) & np.isfinite(hi), 0.5 * (lo + hi), 0.0)
    bounds = list(zip(np.where(np.isinf(lo), None, lo), np.where(np.isinf(hi), None, hi)))
    res = minimize(lambda x: np.sum(np.abs(x) ** p), x0, jac=lambda x: p * np.sign(x) * np.abs(x) ** (p - 1),
                   method="SLSQP", bounds=bounds, constraints=[{"type": "eq", "fun": lambda x: B @ x - b,
                                                                "jac": lambda x: B}],
                   options={"ftol": 1e-10, "maxiter": 500})
    return res.x, bool(res.success)


def per_frame_solvers(B, b, lo, hi, rounds):
    """The frames' problems alone by the dual Newton route (vmapped) and by the augmented
    Lagrangian around optax (`solver="optax"`, frames in order, warm-started): label ->
    (warm s, compile s, max |x - Newton's|)."""
    from jaxmb._static_optimization import _solve_frames
    from jaxmb._static_optimization_optax import solve_frames_optax

    args = tuple(jax.numpy.asarray(a) for a in (B, b, np.ones(B.shape[2]), lo, hi))
    out, reference = {}, None
    for label, solve, steps in (("dual Newton (vmap)", _solve_frames, 100),
                                ("augmented Lagrangian around optax (scan)", solve_frames_optax, 20000)):
        f = jax.jit(lambda *a, solve=solve, steps=steps: solve(*a, 2.0, 1e-11, steps)[0])
        t = time.perf_counter()
        x = jax.block_until_ready(f(*args))
        first = time.perf_counter() - t
        warm = H.time_calls({label: lambda: f(*args)}, rounds=rounds, min_time=0.0)[label]["best_s"]
        reference = x if reference is None else reference
        out[label] = (warm, first - warm, float(np.max(np.abs(np.asarray(x - reference)))))
    return out


def section(quick=False, opensim_python=None, rounds=None, frozen_path=False):
    """Time the case (gait2392's walk; arm26's motion with `quick`). Returns the section's
    ``rows``, ``notes``, ``headline`` rows, markdown ``table`` and ``meta`` entries."""
    case = "arm26" if quick else "gait2392"
    model_file, motion_file, loads_file, actuator_file, time_range, name = CASES[case]
    rounds = rounds or (3 if quick else 5)
    opensim_python = opensim_python if opensim_python is not None else os.environ.get("JAXMB_OPENSIM_PYTHON", "")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mb.load_osim(DATA / model_file)
    motion = mb.io.read_storage(DATA / motion_file)
    q = mb.io.coordinates_from_motion(model, motion)
    loads = mb.io.read_external_loads(DATA / loads_file, model) if loads_file else ()
    extra = mb.io.read_actuators(DATA / actuator_file, model) if actuator_file else ()

    def call():
        return mb.static_optimization(model, motion.time, q, lowpass_hz=6.0, time_range=time_range,
                                      external_loads=loads, actuators_extra=extra)

    t = time.perf_counter()
    result = jax.block_until_ready(call())
    first = time.perf_counter() - t
    timed = H.time_calls({"jaxmb": call}, rounds=rounds, min_time=0.0)
    warm = timed["jaxmb"]["best_s"]
    k = int(result.time.shape[0])
    ref = mb.io.read_storage(DATA / f"{name}_StaticOptimization_activation.sto")
    ours = np.hstack([np.asarray(result.activations), np.asarray(result.controls)])
    interior = slice(3, -3)
    vs_opensim = float(np.max(np.abs(ours[interior] - ref.values[interior])))
    # scipy SLSQP frame by frame on the same problems.
    B, b = np.asarray(result.constraint_matrix), np.asarray(result.constraint_target)
    lo = np.array([float(m.min_control) for m in model.muscles] + [float(a.min_control) for a in extra])
    hi = np.array([float(m.max_control) for m in model.muscles] + [float(a.max_control) for a in extra])
    cpu = time.process_time()
    sols = [slsqp(B[i], b[i], lo, hi) for i in range(k)]
    scipy_s = time.process_time() - cpu
    vs_scipy = float(np.max(np.abs(np.stack([s[0] for s in sols]) - ours)))
    scipy_ok = sum(s[1] for s in sols)
    solvers = per_frame_solvers(B, b, lo, hi, rounds)
    if opensim_python:
        osim = opensim_cpu_seconds(opensim_python, case)
        source = f"measured in this run ({opensim_python})"
    else:
        stored = json.loads((DATA / "static_optimization_timing.json").read_text())
        osim = float(stored["subject01_walk1" if case == "gait2392" else "arm26"]["cpu_seconds"])
        source = "stored in tests/data/opensim/motion/static_optimization_timing.json (no --opensim-python)"
    rows = [dict(what="jaxmb static_optimization, all frames (warm)", seconds=warm, ms_per_frame=H.ms(warm / k),
                 compile_s=first - warm, max_diff="-"),
            dict(what="OpenSim 4.6 AnalyzeTool + StaticOptimization (CPU)", seconds=osim,
                 ms_per_frame=H.ms(osim / k), compile_s=0.0, max_diff=f"{vs_opensim:.2g} (interior frames)"),
            dict(what=f"scipy SLSQP frame by frame ({scipy_ok}/{k} converged)", seconds=scipy_s,
                 ms_per_frame=H.ms(scipy_s / k), compile_s=0.0, max_diff=f"{vs_scipy:.2g}")]
    if frozen_path:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            osim_model = mb.load_osim(DATA / model_file, wrap_geometry="opensim")

        def call_frozen():
            return mb.static_optimization(osim_model, motion.time, q, lowpass_hz=6.0, time_range=time_range,
                                          external_loads=loads, actuators_extra=extra, moment_arms="frozen_path")

        t = time.perf_counter()
        frozen = jax.block_until_ready(call_frozen())
        frozen_first = time.perf_counter() - t
        frozen_warm = H.time_calls({"frozen": call_frozen}, rounds=rounds, min_time=0.0)["frozen"]["best_s"]
        frozen_x = np.hstack([np.asarray(frozen.activations), np.asarray(frozen.controls)])
        vs = float(np.max(np.abs(frozen_x[interior] - ref.values[interior])))
        rows.insert(1, dict(what="jaxmb on OpenSim's problem (wrap_geometry='opensim', moment_arms='frozen_path'), "
                                 "all frames (warm)", seconds=frozen_warm, ms_per_frame=H.ms(frozen_warm / k),
                            compile_s=frozen_first - frozen_warm, max_diff=f"{vs:.2g} from OpenSim (interior frames)"))
    for label, (seconds, compile_s, diff) in solvers.items():
        rows.append(dict(what=f"per-frame solver alone, same B and b: {label}", seconds=seconds,
                         ms_per_frame=H.ms(seconds / k), compile_s=compile_s, max_diff=f"{diff:.2g}"))
    notes = [f"{case}: {len(model.muscles)} muscles, {len(extra)} actuators, {model.nq} coordinates, {k} frames; "
             f"OpenSim's figure {source}; its time includes reading the model and states, jaxmb's includes "
             "smoothing the motion and sampling the external loads",
             f"largest torque residual {float(np.max(np.asarray(result.torque_residual))):.2g}"]
    return {"meta": dict(model=model_file, frames=k, rounds=rounds, opensim_seconds=osim, opensim_source=source),
            "rows": rows, "notes": notes,
            "headline": [{"what": f"{model_file}: static optimization of {k} frames ({len(model.muscles)} muscles), s",
                          "jaxmb": f"{warm:.3g} warm (compile {first - warm:.0f} s)",
                          "alternative": f"OpenSim 4.6 {osim:.3g} CPU; scipy SLSQP {scipy_s:.3g}",
                          "script": "bench_muscles.py"}],
            "table": H.markdown_table(rows, [("what", "what"), ("seconds", "s"), ("ms_per_frame", "ms/frame"),
                                             ("compile_s", "compile s"),
                                             ("max_diff", "max |activation diff| vs jaxmb")])}

