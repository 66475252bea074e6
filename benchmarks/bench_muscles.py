"""Muscle geometry against OpenSim: all muscle lengths and the moment-arm matrix
R = -dL/dq (nq x n_muscles) per state, `mb.muscle_lengths_and_moment_arms` (one
resolution of the paths), single states and batches, compile time apart.

OpenSim's cost for the same work (``State.setQ``, ``realizePosition``, ``getLength`` of
every muscle and ``computeMomentArm`` of every muscle and independent coordinate, at
the same random states) is measured in the same run when a Python with OpenSim is given
(``--opensim-python`` or ``$JAXMB_OPENSIM_PYTHON``; ``pip install opensim`` into a
separate venv), by ``tests/data/opensim/opensim_reference.py --timing-only``;
otherwise the figure stored in the reference file is used, and the result says so.

Models: MoBL-ARMS (50 muscles, 7 coordinates; its first compile takes minutes) by
default, arm26 (6 muscles, 2 coordinates; single states only) with ``--quick``.

    python benchmarks/bench_muscles.py [--quick] [--model M.osim --reference R.npz]
                                       [--batch-sizes 16,256] [--opensim-python PY]
"""

from __future__ import annotations

import argparse
import os
import shutil
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

DATA = H.ROOT / "tests" / "data" / "opensim"
MODELS = {"mobl_arms": (H.ROOT.parent / "shared" / "models" / "MOBL_ARMS_fixed_41.osim", DATA / "mobl_arms.npz"),
          "arm26": (H.ROOT / "jaxmb" / "data" / "arm26.osim", DATA / "arm26.npz")}


def opensim_seconds(python, model, reference, repeats):
    """OpenSim's (wall, CPU) seconds per state, measured now on a scratch copy of the
    reference file."""
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp) / "reference.npz"
        shutil.copyfile(reference, scratch)
        subprocess.run([python, str(DATA / "opensim_reference.py"), str(model), str(scratch), "--timing-only",
                        "--timing-repeats", str(repeats)], check=True)
        d = np.load(scratch)
        return (float(d["opensim_seconds_per_state_lengths_and_moment_arms"]),
                float(d["opensim_cpu_seconds_per_state_lengths_and_moment_arms"]))


def run(quick=False, model=None, reference=None, batch_sizes=None, muscles=None, opensim_python=None, rounds=None,
        out_dir=H.RESULTS):
    name = "arm26" if quick else "mobl_arms"
    model_path, ref_path = Path(model or MODELS[name][0]), Path(reference or MODELS[name][1])
    # Batches compile for minutes even on arm26 (every wrap's iterations under vmap): not in --quick.
    batch_sizes = batch_sizes if batch_sizes is not None else (() if quick else (16, 256))
    rounds = rounds or (3 if quick else 5)
    opensim_python = opensim_python if opensim_python is not None else os.environ.get("JAXMB_OPENSIM_PYTHON", "")
    notes = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = mb.load_osim(str(model_path))
    if muscles:  # a subset (a smaller program to compile)
        m = eqx.tree_at(lambda x: x.muscles, m, tuple(x for x in m.muscles if x.name in muscles))
        notes.append(f"only the muscles {list(muscles)}: OpenSim's figure is for all of the model's muscles")
    d = np.load(ref_path)
    states = jnp.asarray(d["random_q_ind"])
    fn = lambda q: mb.muscle_lengths_and_moment_arms(m, q)  # noqa: E731
    calls, compile_s, per = {}, {}, {}
    single, lo, co = H.compile_apart(fn, states[0])
    calls[("jit", 1)] = lambda: [single(q) for q in states]
    compile_s[("jit", 1)], per[("jit", 1)] = lo + co, len(states)
    for b in batch_sizes:
        qs = jnp.asarray(np.resize(np.asarray(states), (b, m.nq)))
        for how, f in (("vmap", jax.vmap(fn)), ("lax.map", lambda x: jax.lax.map(fn, x))):
            comp, lo, co = H.compile_apart(f, qs)
            calls[(how, b)] = lambda comp=comp, qs=qs: comp(qs)
            compile_s[(how, b)], per[(how, b)] = lo + co, b
    timed = H.time_calls(calls, rounds=rounds, min_time=0.0)
    if opensim_python:
        osim_wall, osim_cpu = opensim_seconds(opensim_python, model_path, ref_path, rounds)
        source = f"measured in this run ({opensim_python})"
    else:
        osim_wall = float(d["opensim_seconds_per_state_lengths_and_moment_arms"])
        osim_cpu = float(d["opensim_cpu_seconds_per_state_lengths_and_moment_arms"])
        source = f"stored in {ref_path.name} when it was generated (no OpenSim given: --opensim-python)"
    notes.append(f"OpenSim {H.ms(osim_wall):.4g} ms/state wall, {H.ms(osim_cpu):.4g} ms CPU, {source}")
    osim = osim_cpu if H.clock() == "cpu" else osim_wall
    rows = []
    for key in calls:
        seconds = timed[key]["best_s"] / per[key]
        rows.append(dict(how=key[0], batch=key[1], compile_s=compile_s[key], ms_per_state=H.ms(seconds),
                         opensim_over_this=osim / seconds))
    result = {"meta": H.meta("muscles", batch_sizes=list(batch_sizes), quick=quick, model=model_path.name,
                             n_muscles=len(m.muscles), nq=int(m.nq), rounds=rounds,
                             opensim_seconds_per_state=osim, opensim_source=source),
              "rows": rows, "notes": notes,
              "headline": headline(rows, model_path.name, len(m.muscles), int(m.nq), osim)}
    table = H.markdown_table(rows, [("how", "how"), ("batch", "batch"), ("compile_s", "compile s"),
                                    ("ms_per_state", "ms/state"), ("opensim_over_this", "OpenSim / jaxmb")])
    return H.write(result, out_dir, table)


def headline(rows, model, n_muscles, nq, osim):
    best = min(rows, key=lambda r: r["ms_per_state"])
    jit = next(r for r in rows if r["how"] == "jit")
    return [{"what": f"{model}: {n_muscles} muscle lengths and the {nq} x {n_muscles} moment arms, ms per state",
             "jaxmb": f"{jit['ms_per_state']:.4g} single (compile {jit['compile_s']:.0f} s); "
                      f"best {best['ms_per_state']:.4g} ({best['how']}, batch {best['batch']})",
             "alternative": f"OpenSim 4.6 {H.ms(osim):.4g}", "script": "bench_muscles.py"}]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="arm26, single states only")
    p.add_argument("--model")
    p.add_argument("--reference", help="the model's reference .npz (tests/data/opensim/)")
    p.add_argument("--batch-sizes", help="comma-separated; empty for single states only")
    p.add_argument("--opensim-python", help="a Python with `opensim` (default: $JAXMB_OPENSIM_PYTHON)")
    p.add_argument("--out-dir", default=str(H.RESULTS))
    a = p.parse_args(argv)
    batches = None if a.batch_sizes is None else tuple(int(x) for x in a.batch_sizes.split(",") if x.strip())
    run(quick=a.quick, model=a.model, reference=a.reference, batch_sizes=batches, opensim_python=a.opensim_python,
        out_dir=a.out_dir)


if __name__ == "__main__":
    main()
