"""Batches: what a state or a simulation costs inside a batch, per member.

- `forward_dynamics` of `planar_chain(7)` over B random states: one plain ``jax.vmap``
  over all of them (which jaxmb's batching rule runs in chunks of 128 on a CPU) against
  ``jax.lax.map(..., batch_size=128)`` written by hand, µs per state; B from 128 to
  131072 (a curve of cost per state against batch size, past 10^5).
- Andrews' squeezer, B simulations with the spring's stiffness scaled by
  1 + 0.05 N(0, 1) (the first member nominal), one ``jax.vmap``, Dopri8: the embedded
  ODE (implicit, pre-modeled) at rtol = atol = `tol` against the index-1 DAE (Baumgarte
  100) at the cheapest of tol, tol/3, tol/10 whose nominal member has as many digits
  at t = 0.03 as the embedded route's, ms per simulation.

- muscle lengths and moment arms (arm26 by default: paths over an ellipsoid and
  cylinders, whose iterations run state by state; any `.osim` with ``--split-models``)
  over B random in-range states on one CPU device (``jax.vmap``) against the batch split
  over every CPU device
  (``jax.shard_map`` of the same ``vmap``, docs/how-to/batches.md), wall-clock ms per
  state; with one device (JAX's default), that row is skipped with a note: ask for one
  device per core with ``JAXMB_CPU_DEVICES=N``.

On an accelerator, pass large batches (``--batch-sizes 4096,65536 --sims 16384``).

    python benchmarks/bench_batches.py [--quick] [--batch-sizes 1024,65536] [--sims 1024]
    JAXMB_CPU_DEVICES=2 python benchmarks/bench_batches.py --quick --sims 0 [--split-models A.osim,B.osim] [--split-batch 256]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import _harness as H  # noqa: E402  (sets XLA flags and x64 before jax)

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmb as mb  # noqa: E402
from benchmarks.bench_closed_chains import andrews_models, compiled, digits, simulation  # noqa: E402


def scaled_spring(model, scale):
    """The model with every `mb.LinearSpring` among its loads `scale` times as stiff."""
    for i, load in enumerate(model.loads):
        if isinstance(load, mb.LinearSpring):
            model = eqx.tree_at(lambda m, i=i: m.loads[i].stiffness, model, load.stiffness * scale)
    return model


def chain_rows(n, batch_sizes, chunk, rounds):
    model = mb.models.planar_chain(n)
    rng = np.random.default_rng(0)
    calls, compile_s, states = {}, {}, {}
    fd = lambda m, x: mb.forward_dynamics(m, x[0], x[1], x[2])  # noqa: E731
    for b in batch_sizes:
        xs = tuple(jnp.asarray(rng.uniform(-a, a, (b, n))) for a in (np.pi, 2.0, 5.0))
        for how, fn in (("vmap", lambda m, xs: jax.vmap(lambda x: fd(m, x))(xs)),
                        (f"lax.map, chunks of {chunk}", lambda m, xs: jax.lax.map(lambda x: fd(m, x), xs,
                                                                                 batch_size=chunk))):
            comp, lo, co = H.compile_apart(fn, model, xs)
            calls[(how, b)] = lambda comp=comp, xs=xs: comp(model, xs)
            compile_s[(how, b)], states[(how, b)] = lo + co, b
    timed = H.time_calls(calls, rounds=rounds, min_time=0.05)
    return [dict(what=f"planar_chain({n}) forward dynamics", how=how, batch=b, compile_s=compile_s[(how, b)],
                 per_member=H.us(timed[(how, b)]["best_s"]) / b, unit="µs/state") for (how, b) in calls]


def andrews_rows(sims, tol, kinds, rounds):
    models = andrews_models(fourier="fourier" in kinds, quintic="quintic" in kinds)
    scale = (1.0 + 0.05 * jax.random.normal(jax.random.PRNGKey(0), (sims,))).at[0].set(1.0)
    configs = {}
    for kind in kinds:
        configs[(kind, tol)] = (kind, models[kind], tol)
    for t in (tol, tol / 3, tol / 10):
        configs[("DAE", t)] = ("DAE", models["implicit"], t)
    calls, compile_s, nominal = {}, {}, {}
    for key, (kind, model, t) in configs.items():
        one = simulation(kind, model, "dopri8", baumgarte=100.0)
        batched = jax.vmap(lambda m, s, tl, one=one: one(scaled_spring(m, s), tl), in_axes=(None, 0, None))
        call, c = compiled(lambda m, tl, batched=batched: batched(m, scale, tl), model, tol=t)
        calls[key] = lambda call=call, t=t: call(t)
        compile_s[key] = c
        angles, _ = call(t)
        nominal[key] = digits(angles[0])
    timed = H.time_calls(calls, rounds=rounds, min_time=0.0)
    rows = [dict(what=f"Andrews' squeezer, {kind}" + (", Baumgarte 100" if kind == "DAE" else ""), how="vmap",
                 batch=sims, tol=t, compile_s=compile_s[(kind, t)], digits=nominal[(kind, t)],
                 per_member=H.ms(timed[(kind, t)]["best_s"]) / sims, unit="ms/simulation") for (kind, t) in calls]
    embedded = [r for r in rows if "DAE" not in r["what"]]
    need = max(r["digits"] for r in embedded)
    matched = [r for r in rows if "DAE" in r["what"] and r["digits"] >= need - 0.05]
    dae = min(matched or [r for r in rows if "DAE" in r["what"]], key=lambda r: r["per_member"])
    for r in embedded:
        r["dae_over_this"] = dae["per_member"] / r["per_member"]
    dae["matched"] = "the DAE run compared" if matched else "the cheapest DAE run (none reached the digits)"
    return rows


def split_rows(paths, batch, rounds):
    """Each model's (`.osim` paths) lengths + moment arms of `batch` states, one device
    against every CPU device (wall-clock per state: the devices run side by side); [] and a
    note with one device."""
    cores = jax.devices("cpu")
    if len(cores) < 2:
        return [], ["split over CPU devices: skipped (one CPU device; set JAXMB_CPU_DEVICES to the number of cores)"]
    batch -= batch % len(cores)
    mesh = jax.make_mesh((len(cores),), ("states",), devices=cores)
    rows = []
    for path in paths:
        rows += _split_model_rows(mb.load_osim(path), Path(path).stem, batch, rounds, cores, mesh)
    return rows, []


def _split_model_rows(model, name, batch, rounds, cores, mesh):
    from jax.sharding import PartitionSpec as P

    qs = jax.random.uniform(jax.random.PRNGKey(1), (batch, model.nq), minval=model.q_lower, maxval=model.q_upper)
    geometry = jax.vmap(lambda q: mb.muscle_lengths_and_moment_arms(model, q))
    split = jax.shard_map(geometry, mesh=mesh, in_specs=P("states"), out_specs=P("states"), check_vma=False)
    hows = {"vmap, one device": (geometry, jax.device_put(qs, cores[0])),
            f"shard_map over {len(cores)} CPU devices": (split, jax.device_put(qs, jax.NamedSharding(mesh, P("states"))))}
    calls, compile_s = {}, {}
    for how, (fn, x) in hows.items():
        comp, lo, co = H.compile_apart(fn, x)
        calls[how], compile_s[how] = (lambda comp=comp, x=x: comp(x)), lo + co
    timed = H.time_calls(calls, rounds=rounds, min_time=0.2, how="wall")
    what = f"{name} lengths + {model.nq} x {len(model.muscles)} moment arms"
    return [dict(what=what, how=how, batch=batch, compile_s=compile_s[how],
                 per_member=H.ms(timed[how]["best_s"]) / batch, unit="ms/state wall") for how in calls]


ARM26 = H.ROOT / "jaxmb" / "data" / "arm26.osim"


def run(quick=False, n=7, batch_sizes=None, chunk=128, sims=None, tol=1e-8, kinds=None, rounds=None,
        out_dir=H.RESULTS, split_models=(ARM26,), split_batch=None):
    batch_sizes = batch_sizes or ((8192,) if quick else (128, 1024, 8192, 65536, 131072))
    sims = sims if sims is not None else (64 if quick else 1024)
    kinds = kinds or (("quintic",) if quick else ("implicit", "quintic", "fourier"))
    rounds = rounds or (3 if quick else 5)
    rows = chain_rows(n, batch_sizes, chunk, rounds) + (andrews_rows(sims, tol, kinds, rounds) if sims else [])
    split, notes = split_rows(split_models, split_batch or (64 if quick else 512), rounds)
    rows += split
    result = {"meta": H.meta("batches", batch_sizes=list(batch_sizes), quick=quick, simulations=sims, tol=tol,
                             rounds=rounds, cpu_devices=len(jax.devices("cpu"))),
              "rows": rows, "notes": notes, "headline": headline(rows)}
    table = H.markdown_table(rows, [("what", "what"), ("how", "how"), ("batch", "batch"), ("tol", "tol"),
                                    ("digits", "digits (nominal)"), ("compile_s", "compile s"),
                                    ("per_member", "per member"), ("unit", "unit"),
                                    ("dae_over_this", "DAE / this"), ("matched", "")])
    return H.write(result, out_dir, table)


def headline(rows):
    out = []
    fd = [r for r in rows if r["unit"] == "µs/state"]
    if fd:
        b = max(r["batch"] for r in fd)
        at = {r["how"]: r["per_member"] for r in fd if r["batch"] == b}
        out.append({"what": f"{fd[0]['what']}, batch of {b}, µs per state",
                    "jaxmb": "; ".join(f"{k} {v:.3g}" for k, v in at.items()), "alternative": "",
                    "script": "bench_batches.py"})
    split = [r for r in rows if r["unit"] == "ms/state wall"]
    for one, many in zip(split[::2], split[1::2]):
        out.append({"what": f"{one['what']}, batch of {one['batch']}, ms per state (wall-clock)",
                    "jaxmb": f"{many['how']} {many['per_member']:.3g}; {one['how']} {one['per_member']:.3g}",
                    "alternative": "", "script": "bench_batches.py"})
    pre = [r for r in rows if "dae_over_this" in r and "implicit" not in r["what"]]
    if pre:
        best = max(pre, key=lambda r: r["dae_over_this"])
        out.append({"what": f"Andrews' squeezer, {best['batch']} simulations under vmap (tol {best['tol']:g}), "
                            "pre-modeled against the index-1 DAE",
                    "jaxmb": f"{best['per_member']:.3g} ms per simulation, {best['dae_over_this']:.1f}x faster",
                    "alternative": "jaxmb's own DAE", "script": "bench_batches.py"})
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="batch 8192 states, 64 simulations, quintic pre-model only")
    p.add_argument("--batch-sizes", help="comma-separated numbers of states")
    p.add_argument("--sims", type=int, help="number of simulations in the Andrews batch")
    p.add_argument("--split-models", help="comma-separated .osim files for the batch split over CPU devices "
                                           "(default: arm26)")
    p.add_argument("--split-batch", type=int, help="states in the split batch (default 64, 512 without --quick)")
    p.add_argument("--out-dir", default=str(H.RESULTS))
    a = p.parse_args(argv)
    run(quick=a.quick, batch_sizes=tuple(int(x) for x in a.batch_sizes.split(",")) if a.batch_sizes else None,
        sims=a.sims, out_dir=a.out_dir, split_models=tuple(a.split_models.split(",")) if a.split_models else (ARM26,),
        split_batch=a.split_batch)


if __name__ == "__main__":
    main()
