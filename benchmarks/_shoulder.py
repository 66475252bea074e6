"""The shoulder study (Ehsani 2016, section 4-4 C): computed-torque tracking of MoBL-ARMS's
shoulder (`jaxmb.studies.track_shoulder`, the rhythm embedded as joint functions, an ODE in
three coordinates) against the same tracking with the rhythm as constraints of an index-1
DAE in the 14 moving joint variables (`jaxmb.studies.track_shoulder_dae`).

Ehsani reports the embedded ODE "more than 3 times faster" than the DAE. Both routes run
the dissertation's gains K = diag(100, 100, 1000) over one period of the desired elevation
(2 s, 201 frames at 100 Hz) at several tolerances (rtol = atol); each run's accuracy is
its largest elevation error |q - q_des| (the held coordinates are exact on both routes).
At each accuracy target each route is charged its cheapest run that reaches it.

Throughput: frames of the study (tracked states with their torques, 100 Hz) per second
of CPU, one simulation, and ``vmap`` over a batch of trajectories (the highest elevation
varied), the issue's target being 1000 frames per second.

Needs MoBL-ARMS at ../shared/models/MOBL_ARMS_fixed_41.osim (``--shoulder-model``). The
``shoulder`` section of ``bench_closed_chains.py``:

    python benchmarks/bench_closed_chains.py --sections shoulder [--quick] [--shoulder-model PATH]
"""

from __future__ import annotations

import warnings
from pathlib import Path

from benchmarks import _harness as H  # sets XLA flags and x64 before jax

import jax
import jax.numpy as jnp
import numpy as np

import jaxmb as mb
from jaxmb import studies

MODEL = H.ROOT.parent / "shared" / "models" / "MOBL_ARMS_fixed_41.osim"
FRAMES = 201  # 2 s at 100 Hz


def route(kind, baumgarte=0.0):
    """``f(model, tol, high) -> (elevation error, drift, steps, torques)`` of one route."""
    def f(m, tol, high):
        traj = studies.ElevationTrajectory(high=high)
        if kind == "DAE":
            r = studies.track_shoulder_dae(m, traj, n_frames=FRAMES, rtol=tol, atol=tol, alpha=baumgarte,
                                           beta=baumgarte)
        else:
            r = studies.track_shoulder(m, traj, n_frames=FRAMES, rtol=tol, atol=tol)
        return jnp.max(jnp.abs(r.q - r.q_ref)), jnp.max(r.drift), r.num_steps, r.tau
    return f


def shoulder(path):
    """The study's shoulder: MoBL-ARMS's skeleton read with the study's locked coordinates."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MoBL's impossible inertias are reported, not errors
        return studies.shoulder_model(mb.io.read_osim(path, muscles=False, locked=studies.locked_coordinates()).model)


def section(quick=False, model=None, tols=None, batch_sizes=None, baumgarte=None, rounds=None):
    """Time both routes (fewer tolerances and batches with `quick`). Returns the section's
    ``rows``, ``notes``, ``headline`` rows, markdown ``table`` and ``meta`` entries."""
    path = Path(model) if model else MODEL
    tols = tols or ((1e-7, 1e-8) if quick else (1e-6, 1e-7, 1e-8, 1e-9, 1e-10))
    batch_sizes = batch_sizes or ((8,) if quick else (8, 32))
    baumgarte = baumgarte if baumgarte is not None else ((0.0,) if quick else (0.0, 10.0))
    rounds = rounds or (3 if quick else 5)
    notes = []
    if not path.exists():
        notes.append(f"{path} not found: nothing measured")
        return {"meta": {}, "rows": [], "headline": [], "notes": notes, "table": ""}
    # The study owns its model: both routes compile it in as a constant (XLA folds the
    # joints' constant frames and the bodies' inertias into the right-hand side).
    model = shoulder(path)
    high = jnp.asarray(np.deg2rad(110.0))
    configs = {("embedded ODE", None): route("ODE")}
    configs.update({("DAE", ab): route("DAE", ab) for ab in baumgarte})
    compiled, rows = {}, []
    for key, fn in configs.items():
        comp, lo, co = H.compile_apart(lambda tol, h, fn=fn: fn(model, tol, h), jnp.asarray(1e-8), high)
        compiled[key] = (comp, lo + co)
    calls = {(key, tol): (lambda c=compiled[key][0], tol=tol: c(jnp.asarray(tol), high))
             for key in configs for tol in tols}
    timed = H.time_calls(calls, rounds=rounds, min_time=0.05)
    for (key, tol), t in timed.items():
        err, drift, steps, _ = calls[(key, tol)]()
        kind, ab = key
        rows.append(dict(route=kind + (f", Baumgarte {ab:g}" if ab is not None else ""), kind=kind, tol=tol,
                         compile_s=compiled[key][1], run_ms=H.ms(t["best_s"]), error=float(err),
                         drift=float(drift), steps=int(steps), frames_per_s=FRAMES / t["best_s"]))
    summary = speedups(rows, (1e-4, 1e-6, 1e-8))
    batch_rows = batches(model, batch_sizes, rounds)
    table = (H.markdown_table(rows, [("route", "route"), ("tol", "tol"), ("run_ms", "ms"), ("steps", "steps"),
                                     ("error", "max |elevation error| rad"), ("drift", "max |Φ| rad"),
                                     ("frames_per_s", "frames/s"), ("compile_s", "compile s")])
             + "\n\n" + H.markdown_table(summary, [("target", "error ≤ rad"), ("ode_ms", "embedded ms"),
                                                   ("ode_config", "its cheapest run"), ("dae_ms", "DAE ms"),
                                                   ("dae_config", "DAE's cheapest run"),
                                                   ("speedup", "DAE / embedded")])
             + "\n\n" + H.markdown_table(batch_rows, [("batch", "trajectories"), ("tol", "tol"),
                                                      ("run_ms", "ms per batch"), ("frames_per_s", "frames/s"),
                                                      ("compile_s", "compile s")]))
    return {"meta": dict(tols=list(tols), baumgarte=list(baumgarte), batch_sizes=list(batch_sizes), rounds=rounds,
                         frames=FRAMES),
            "rows": rows, "speedups": summary, "batches": batch_rows, "notes": notes,
            "headline": headline(summary, rows, batch_rows), "table": table}


def speedups(rows, targets):
    out = []
    for target in targets:
        best = {}
        for r in rows:
            if r["error"] <= target and (r["kind"] not in best or r["run_ms"] < best[r["kind"]]["run_ms"]):
                best[r["kind"]] = r
        if "DAE" in best and "embedded ODE" in best:
            o, d = best["embedded ODE"], best["DAE"]
            out.append(dict(target=target, ode_ms=o["run_ms"], ode_config=f"tol {o['tol']:.0e}, {o['steps']} steps",
                            dae_ms=d["run_ms"], dae_config=f"{d['route']}, tol {d['tol']:.0e}, {d['steps']} steps",
                            speedup=d["run_ms"] / o["run_ms"]))
    return out


def batches(model, sizes, rounds, tol=1e-8):
    """The embedded route under ``vmap`` over trajectories (highest elevation 90-120 degrees)."""
    fn = route("ODE")
    out = []
    for b in sizes:
        highs = jnp.asarray(np.deg2rad(np.linspace(90.0, 120.0, b)))
        comp, lo, co = H.compile_apart(lambda h: jax.vmap(lambda x: fn(model, jnp.asarray(tol), x))(h), highs)
        t = H.time_calls({b: lambda c=comp, h=highs: c(h)}, rounds=rounds, min_time=0.05)[b]
        out.append(dict(batch=b, tol=tol, run_ms=H.ms(t["best_s"]), frames_per_s=b * FRAMES / t["best_s"],
                        compile_s=lo + co))
    return out


def headline(summary, rows, batch_rows):
    out = []
    if summary:
        ratios = [s["speedup"] for s in summary]
        out.append({"what": "shoulder study (MoBL-ARMS, computed torque, 2 s), embedded ODE against the index-1 "
                            "DAE at equal elevation accuracy",
                    "jaxmb": f"{min(ratios):.1f}-{max(ratios):.1f}x faster",
                    "alternative": "the same tracking as a DAE (jaxmb.studies.track_shoulder_dae)",
                    "script": "bench_closed_chains.py"})
    single = [r for r in rows if r["kind"] == "embedded ODE" and r["tol"] == 1e-8]
    best = max(batch_rows, key=lambda r: r["frames_per_s"]) if batch_rows else None
    if single or best:
        parts = [f"{single[0]['frames_per_s']:.0f} frames/s one simulation (tol 1e-8)"] if single else []
        if best:
            parts.append(f"{best['frames_per_s']:.0f} frames/s batched ({best['batch']} trajectories)")
        out.append({"what": "shoulder study throughput (tracked frames with torques, 100 Hz)",
                    "jaxmb": ", ".join(parts), "alternative": "target: 1000 frames/s",
                    "script": "bench_closed_chains.py"})
    return out

