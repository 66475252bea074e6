"""Time muscle lengths + moment arms per state (single and batched), compile separate.

    python benchmarks/bench_muscles.py [model.osim] [reference.npz] [--batch-sizes 16,256,4096]
                                       [--repeats 20] [--method closed_form|autodiff]
                                       [--opensim-python /path/to/venv-with-opensim/bin/python]

Prints a table and writes benchmarks/results/muscles.json. Default model:
MoBL-ARMS with its OpenSim 4.6 reference data (tests/data/opensim/mobl_arms.npz),
and OpenSim's per-state cost (State.setQ, realizePosition, getLength of every
muscle and computeMomentArm of every muscle x independent coordinate, at the
same random states) beside jaxmb's: measured in the same run when a Python with
OpenSim is given (``--opensim-python`` or ``$JAXMB_OPENSIM_PYTHON``; OpenSim
4.6 installs with ``pip install opensim`` into a separate venv), otherwise the
figure stored in the reference file. Each state evaluates all muscle lengths and the full
moment-arm matrix R = -dL/dq (nq x n_muscles): with the default closed form by
``muscle_lengths_and_moment_arms`` (one resolution of the paths), with
``--method autodiff`` by ``muscle_lengths`` and ``-jax.jacfwd`` of it.

Rows: "jit" is one state per call, timed like OpenSim's stored figure: a loop
over the 20 reference random states, best of --repeats loops, divided by 20
(the cost depends on the state: multi-wrap muscles stop their wrap passes
early where they converge). Each batch size runs as ``jax.vmap`` and as
``lax.map`` over the random states repeated to the batch size (best of 3
calls; per-state time = call time / batch). Compile time
(``lower().compile()``) is reported apart.
MoBL-ARMS compiles in about 1-2 min per row on the shared 2-core VM, so the
full default (3 batch sizes x 2 modes + jit = 7 compilations) takes about
15 min there; ``--batch-sizes 16,256`` about 8 min.
"""

import argparse
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import datetime, timezone

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
# Compile times are reported: no persistent compilation cache (JAX_COMPILATION_CACHE_DIR).
jax.config.update("jax_compilation_cache_dir", None)

from jaxmb import _muscles as M  # noqa: E402
from jaxmb.io import load_osim  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _best(f, x, repeats):
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(f(x))
        best = min(best, time.perf_counter() - t)
    return best


def _time_opensim(python, model, reference, repeats):
    """OpenSim's per-state cost, measured now by scripts/opensim_reference.py --timing-only
    (State.setQ, realizePosition, getLength of every muscle, computeMomentArm of every muscle x
    independent coordinate, at the reference file's random states) on a scratch copy of the
    reference file. Returns (wall s/state, CPU s/state, method note)."""
    with tempfile.TemporaryDirectory() as tmp:
        scratch = pathlib.Path(tmp) / "reference.npz"
        shutil.copyfile(reference, scratch)
        subprocess.run([python, str(ROOT / "scripts" / "opensim_reference.py"), str(model), str(scratch),
                        "--timing-only", "--timing-repeats", str(repeats)], check=True)
        d = np.load(scratch)
        return (float(d["opensim_seconds_per_state_lengths_and_moment_arms"]),
                float(d["opensim_cpu_seconds_per_state_lengths_and_moment_arms"]),
                str(d["opensim_timing_method"]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", nargs="?", default=str(ROOT.parent / "shared" / "models" / "MOBL_ARMS_fixed_41.osim"))
    ap.add_argument("reference", nargs="?", default=str(ROOT / "tests" / "data" / "opensim" / "mobl_arms.npz"))
    ap.add_argument("--batch-sizes", default="16,256,4096", help="comma-separated; empty for jit only")
    ap.add_argument("--repeats", type=int, default=5, help="loops over the random states timed for jit (best of)")
    ap.add_argument("--method", default="closed_form", choices=("closed_form", "autodiff"))
    ap.add_argument("--opensim-python", default=os.environ.get("JAXMB_OPENSIM_PYTHON", ""),
                    help="a Python with `opensim` installed (e.g. a separate venv's bin/python): "
                         "OpenSim's own per-state cost is then measured in this run, at the same "
                         "random states, instead of read from the reference file "
                         "(default: $JAXMB_OPENSIM_PYTHON)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "muscles.json"))
    args = ap.parse_args(argv)
    batches = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    load_start = list(os.getloadavg())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = load_osim(args.model)
    d = np.load(args.reference)
    if args.method == "closed_form":
        # One resolution of the paths for both (what a muscle-driven simulation calls).
        fn = lambda q: M.muscle_lengths_and_moment_arms(model, q)  # noqa: E731
    else:
        fn = lambda q: (M.muscle_lengths(model, q), M.moment_arms(model, q, method=args.method))  # noqa: E731
    rows = []
    q0 = jnp.asarray(d["random_q_ind"][0])
    t = time.perf_counter()
    single = jax.jit(fn).lower(q0).compile()
    c = time.perf_counter() - t
    jax.block_until_ready(single(q0))
    states = [jnp.asarray(q) for q in d["random_q_ind"]]
    loop = lambda _: [single(q) for q in states]  # noqa: E731
    rows.append({"mode": "jit", "batch": 1, "compile_s": c,
                 "s_per_state": _best(loop, None, args.repeats) / len(states)})
    print(f"jit compiled in {c:.1f} s", flush=True)
    for b in batches:
        qs = jnp.asarray(np.resize(d["random_q_ind"], (b, model.nq)))
        for mode, batched in (("vmap", jax.vmap(fn)), ("lax.map", lambda x: jax.lax.map(fn, x))):
            t = time.perf_counter()
            f = jax.jit(batched).lower(qs).compile()
            c = time.perf_counter() - t
            jax.block_until_ready(f(qs))
            rows.append({"mode": mode, "batch": b, "compile_s": c, "s_per_state": _best(f, qs, 3) / b})
            print(f"{mode} {b} compiled in {c:.1f} s", flush=True)
    osim_source = "stored in the reference file (measured when it was generated)"
    osim = float(d["opensim_seconds_per_state_lengths_and_moment_arms"])
    osim_cpu = float(d["opensim_cpu_seconds_per_state_lengths_and_moment_arms"])
    osim_note = str(d["opensim_timing_method"]) if "opensim_timing_method" in d else ""
    if args.opensim_python:
        osim, osim_cpu, osim_note = _time_opensim(args.opensim_python, args.model, args.reference,
                                                  args.repeats)
        osim_source = f"measured in this run ({args.opensim_python})"
    print(f"\n{'mode':8s} {'batch':>6s} {'compile s':>10s} {'ms/state':>10s} {'vs OpenSim':>11s}"
          f"   (OpenSim {osim * 1e3:.1f} ms/state wall, {osim_cpu * 1e3:.1f} ms CPU; {osim_source})")
    for r in rows:
        print(f"{r['mode']:8s} {r['batch']:6d} {r['compile_s']:10.1f} {r['s_per_state'] * 1e3:10.3f} "
              f"{osim / r['s_per_state']:10.1f}x")
    out = {
        "benchmark": "muscles",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "python " + " ".join([os.path.relpath(__file__, ROOT)] + (sys.argv[1:] if argv is None else argv)),
        "model": pathlib.Path(args.model).name,
        "n_muscles": len(model.muscles),
        "nq": int(model.nq),
        "method": args.method,
        "computes": "all muscle lengths + moment-arm matrix R (nq x n_muscles) per state",
        "device": str(jax.devices()[0]),
        "cpu_count": os.cpu_count(),
        "load_average_at_start": load_start,
        "load_average_at_end": list(os.getloadavg()),
        "platform": platform.platform(),
        "versions": {"jax": jax.__version__, "numpy": np.__version__, "python": platform.python_version()},
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "dtype": "float64",
        "timing": ("jit: best of --repeats loops over the random states, per state; batched: best of 3 calls "
                   "after a warm-up call, per state; compile = lower().compile()"),
        "repeats": args.repeats,
        "opensim_seconds_per_state": osim,
        "opensim_cpu_seconds_per_state": osim_cpu,
        "opensim_timing_source": osim_source,
        "opensim_timing_note": osim_note,
        "rows": rows,
    }
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
