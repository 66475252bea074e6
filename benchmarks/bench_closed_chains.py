"""Closed chains: Andrews' squeezer as an embedded ODE against the index-1 DAE and scipy,
one simulation at equal accuracy (a work-precision comparison).

Ehsani (2016) reports the embedded formulation with pre-modeled ("empirically-based")
joint functions 4x faster than the index-1 DAE. One tolerance favours whichever route
happens to be more accurate at it, so every route here runs over a sweep of
tolerances, and at each target accuracy each route is charged its cheapest run that
reaches it. Accuracy: significant digits of the seven angles at t = 0.03 s against
the published solution of the Test Set problem 'andrews' (Hairer & Wanner, VII.7).

Routes, each ``jax.jit`` of one simulation with the tolerance traced (one compilation
per route and solver) and the model's arrays as one flat vector argument
(``--model-as constant`` compiles the model in):

- embedded ODE in q = (β,), implicit joint functions (`mb.simulate`);
- embedded ODE, the six dependent angles pre-modeled (`mb.constraints.premodeled`) by
  periodic quintic splines (512 intervals) and, in the full run, Fourier series (order 24);
- index-1 DAE in the seven angles (`mb.constraints.simulate_dae`), Baumgarte α = β in
  {0, 100, 1000} (quick: 100);
- scipy's Radau on the same DAE and DOP853 on the embedded ODE (jitted jaxmb right-hand
  sides), at one tolerance; skipped with a note when scipy is missing.

A second section, ``shoulder`` (`benchmarks/_shoulder.py`), asks the same question of a
musculoskeletal loop: the shoulder rhythm of MoBL-ARMS (Ehsani 2016) embedded as joint
functions against the same computed-torque tracking as an index-1 DAE, at equal accuracy,
and the frames per second it tracks.

    python benchmarks/bench_closed_chains.py [--quick] [--sections andrews,shoulder]
                                             [--model-as flat|constant] [--shoulder-model PATH]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import _harness as H  # noqa: E402  (sets XLA flags and x64 before jax)

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.flatten_util import ravel_pytree  # noqa: E402

import jaxmb as mb  # noqa: E402
from benchmarks import _shoulder  # noqa: E402
from benchmarks._scipy_rhs import dae_rhs_numpy, ode_rhs_numpy  # noqa: E402

SECTIONS = ("andrews", "shoulder")

T1 = 0.03
BETA0 = -0.0617138900142764496358948458001  # the Test Set's initial crank angle, at rest
# The Test Set's solution at t = 0.03 (beta, Theta, gamma, Phi, delta, Omega, epsilon).
REFERENCE = np.array([15.81077119629904, -15.75637105984298, 0.04082224013073101, -0.5347301163226948,
                      0.5244099658805303, 0.5347301163226948, 1.048080741042263])


def digits(angles, reference=REFERENCE):
    """Significant digits: ``-log10`` of the worst angle's relative error (17 if exact)."""
    rel = np.abs(np.asarray(angles) - reference) / np.abs(reference)
    return float(-np.log10(max(rel.max(), 1e-17)))


def model_as_vector(model):
    """``(vector, rebuild)``: the model's arrays as one flat vector, and the model again
    from it (passing ~90 small arrays costs a jitted call about 0.1 ms of dispatch)."""
    params, static = eqx.partition(model, eqx.is_array)
    flat, unravel = ravel_pytree(params)
    return flat, lambda v: eqx.combine(unravel(v), static)


def andrews_models(fourier=True, quintic=True):
    """``{route kind: model}``: the squeezer with implicit joint functions and its
    pre-modeled forms (fit over one crank revolution)."""
    model = mb.models.andrews_squeezer(throw=False)
    out = {"implicit": model}
    if quintic:
        out["quintic"] = mb.constraints.premodeled(model, 0.0, 2 * np.pi, 2 * np.pi / 512, kind="quintic",
                                                   periodic=True)[0]
    if fourier:
        out["fourier"] = mb.constraints.premodeled(model, 0.0, 2 * np.pi, 2 * np.pi / 512, kind="fourier",
                                                   order=24)[0]
    return out


def simulation(kind, model, solver, baumgarte=None, t1=T1):
    """``f(model, tol) -> (seven angles at t1, steps)`` of one route."""
    q0 = jnp.array([BETA0])
    if kind == "DAE":
        z0 = mb.joint_values(model, q0)

        def f(m, tol):
            s = mb.constraints.simulate_dae(m, z0, jnp.zeros(7), t1, alpha=baumgarte, beta=baumgarte, rtol=tol,
                                            atol=tol, solver=solver)
            return s.z[-1], s.stats["num_steps"]
    else:
        def f(m, tol):
            s = mb.simulate(m, q0, jnp.zeros(1), t1, rtol=tol, atol=tol, solver=solver, throw=False)
            return mb.joint_values(m, s.q[-1]), s.stats["num_steps"]
    return f


def compiled(fn, model, model_as="flat", tol=None):
    """``(call(tol), compile seconds)`` with the model as a flat vector argument or compiled
    in. The tolerance is traced (one compilation for every tolerance), or with `tol`
    given, compiled in (``call`` then ignores its argument)."""
    if tol is None:
        args, fixed = (jnp.asarray(1e-6),), lambda t: fn
    else:
        args, fixed = (), lambda _: (lambda m: fn(m, tol))
    if model_as == "constant":
        comp, lo, co = H.compile_apart(lambda *t: fixed(t)(model, *t), *args)
        return (lambda t: comp(*[jnp.asarray(t)][:len(args)])), lo + co
    flat, rebuild = model_as_vector(model)
    comp, lo, co = H.compile_apart(lambda v, *t: fixed(t)(rebuild(v), *t), flat, *args)
    return (lambda t: comp(flat, *[jnp.asarray(t)][:len(args)])), lo + co


def speedups(rows, targets):
    """Per target: the cheapest run of each route kind with at least that many digits,
    and DAE time / embedded time."""
    out = []
    for target in targets:
        best = {}
        for r in rows:
            if r["digits"] >= target and (r["kind"] not in best or r["run_s"] < best[r["kind"]]["run_s"]):
                best[r["kind"]] = r
        if "DAE" not in best:
            continue
        for kind, r in best.items():
            if kind != "DAE":
                out.append(dict(target=target, kind=kind, run_ms=H.ms(r["run_s"]),
                                config=f"{r['route']}, tol {r['tol']:.0e}", dae_ms=H.ms(best["DAE"]["run_s"]),
                                dae_config=f"{best['DAE']['route']}, tol {best['DAE']['tol']:.0e}",
                                speedup=best["DAE"]["run_s"] / r["run_s"]))
    return out


def scipy_rows(models, tol, notes):
    integrate, note = H.optional("scipy.integrate")
    if integrate is None:
        notes.append(f"scipy skipped: {note}")
        return []
    model = models["implicit"]
    z0 = np.asarray(mb.joint_values(model, jnp.array([BETA0])))
    rows = []
    frhs, fjac = dae_rhs_numpy(model)
    y0 = np.concatenate([z0, np.zeros(7)])
    frhs(0.0, y0), fjac(0.0, y0)  # compile the jitted right-hand side and Jacobian
    t = time.perf_counter()
    r = integrate.solve_ivp(frhs, (0.0, T1), y0, method="Radau", rtol=tol, atol=tol, jac=fjac)
    rows.append(dict(route="scipy Radau, index-1 DAE", tol=tol, run_s=time.perf_counter() - t,
                     digits=digits(r.y[:7, -1]), steps=r.t.size - 1))
    orhs, _ = ode_rhs_numpy(model)
    y0 = np.array([BETA0, 0.0])
    orhs(0.0, y0)
    t = time.perf_counter()
    r = integrate.solve_ivp(orhs, (0.0, T1), y0, method="DOP853", rtol=tol, atol=tol)
    el = time.perf_counter() - t
    rows.append(dict(route="scipy DOP853, embedded ODE (jaxmb right-hand side)", tol=tol, run_s=el,
                     digits=digits(mb.joint_values(model, jnp.asarray(r.y[:1, -1]))), steps=r.t.size - 1))
    return rows


def run(quick=False, sections=SECTIONS, shoulder_model=None, out_dir=H.RESULTS, **andrews_options):
    """Both sections (or those named in `sections`) in one result, ``closed_chains``: the
    Andrews rows at the top level (`andrews_options` go to `andrews`), the shoulder study's
    under ``"shoulder"``."""
    sections = H.sections(sections, SECTIONS)
    result = {"rows": [], "speedups": [], "scipy": [], "notes": [], "headline": [], "table": "", "meta": {}}
    if "andrews" in sections:
        result.update(andrews(quick=quick, **andrews_options))
    tables = [result.pop("table")] if result["table"] else []
    meta = result.pop("meta")
    if "shoulder" in sections:
        H.add_section(result, tables, "shoulder", _shoulder.section(quick=quick, model=shoulder_model),
                      "The shoulder study (MoBL-ARMS, Ehsani 2016)")
    result["meta"] = H.meta("closed_chains", quick=quick, sections=list(sections), **meta)
    return H.write(result, out_dir, "\n\n".join(tables))


def andrews(quick=False, tols=None, solvers=None, baumgarte=None, kinds=None, targets=None, rounds=None,
            model_as="flat", scipy_tol=None, trace_tol=True):
    """The Andrews section: its ``rows``, ``speedups``, ``scipy`` rows, ``notes``, ``headline``
    rows, markdown ``table`` and ``meta`` entries."""
    # trace_tol: one compilation per route for every tolerance (jaxmb's `simulate` annotates
    # rtol as a float, so its run-time type checks, as in the test suite, need trace_tol=False).
    tols = tols or ((1e-5, 1e-7, 1e-9) if quick else
                    tuple(m * 10.0**-e for e in range(5, 12) for m in (5, 2, 1)))
    solvers = solvers or (("dopri8",) if quick else ("tsit5", "dopri8"))
    baumgarte = baumgarte if baumgarte is not None else ((100.0,) if quick else (0.0, 100.0, 1000.0))
    kinds = kinds or (("implicit", "quintic") if quick else ("implicit", "quintic", "fourier"))
    targets = targets or ((4, 5, 6, 7) if quick else (4, 5, 6, 7, 8, 9))
    rounds = rounds or (3 if quick else 5)
    scipy_tol = scipy_tol or (1e-6 if quick else 1e-10)
    notes = []
    models = andrews_models(fourier="fourier" in kinds, quintic="quintic" in kinds)
    configs = {}  # (kind, solver, Baumgarte, tol or None if traced) -> (call, compile s)
    for solver in solvers:
        for tol in ((None,) if trace_tol else tols):
            for kind in kinds:
                configs[(kind, solver, None, tol)] = compiled(simulation(kind, models[kind], solver), models[kind],
                                                              model_as, tol)
            for ab in baumgarte:
                configs[("DAE", solver, ab, tol)] = compiled(simulation("DAE", models["implicit"], solver, ab),
                                                             models["implicit"], model_as, tol)
    calls = {(key, tol): (lambda call=configs[key + ((None,) if trace_tol else (tol,))][0], tol=tol: call(tol))
             for key in dict.fromkeys(k[:3] for k in configs) for tol in tols}
    timed = H.time_calls(calls, rounds=rounds, min_time=0.02)
    rows = []
    for (key, tol), t in timed.items():
        kind, solver, ab = key
        angles, steps = calls[(key, tol)]()
        route = f"{kind}, {solver}" + (f", Baumgarte {ab:g}" if ab is not None else "")
        compile_s = configs[key + ((None,) if trace_tol else (tol,))][1]
        rows.append(dict(route=route, kind=kind, solver=solver, baumgarte=ab, tol=tol, compile_s=compile_s,
                         run_s=t["best_s"], digits=digits(angles), steps=int(steps),
                         us_per_step=H.us(t["best_s"]) / max(int(steps), 1)))
    summary = speedups(rows, targets)
    scipy = scipy_rows(models, scipy_tol, notes)
    for s in scipy:
        fastest = [r for r in rows if r["kind"] != "DAE" and r["digits"] >= s["digits"] - 0.05]
        if fastest:
            best = min(fastest, key=lambda r: r["run_s"])
            s["vs_jaxmb"] = f"{s['run_s'] / best['run_s']:.0f}x the cheapest jaxmb embedded run with as many digits"
    notes.append(f"model passed as: {model_as}; tolerances rtol = atol in {list(tols)}")
    if len(tols) < 10:
        notes.append("a coarse tolerance grid charges a route for accuracy it was not asked for, which moves the "
                     "ratios by up to 2x: quote the full run (three tolerances per decade)")
    table = (H.markdown_table(summary, [("target", "digits ≥"), ("kind", "embedded"), ("run_ms", "ms"),
                                        ("config", "its cheapest run"), ("dae_ms", "DAE ms"),
                                        ("dae_config", "DAE's cheapest run"), ("speedup", "DAE / embedded")])
             + "\n\n" + H.markdown_table(scipy, [("route", "scipy"), ("tol", "tol"), ("run_s", "s"),
                                                 ("digits", "digits"), ("steps", "steps"), ("vs_jaxmb", "")]))
    return {"meta": dict(model_as=model_as, solvers=list(solvers), baumgarte=list(baumgarte), tols=list(tols),
                         rounds=rounds),
            "rows": rows, "speedups": summary, "scipy": scipy, "notes": notes, "headline": headline(summary, scipy),
            "table": table}


def headline(summary, scipy):
    out = []
    pre = [s for s in summary if s["kind"] in ("quintic", "fourier")]
    best = {}
    for s in pre:  # the better pre-model at each target
        if s["target"] not in best or s["speedup"] > best[s["target"]]["speedup"]:
            best[s["target"]] = s
    if best:
        ratios = [s["speedup"] for s in best.values()]
        out.append({"what": f"Andrews' squeezer, one simulation at equal accuracy ({min(best)}-{max(best)} digits), "
                            "pre-modeled embedded ODE against the index-1 DAE",
                    "jaxmb": f"{min(ratios):.1f}-{max(ratios):.1f}x faster", "alternative": "jaxmb's own DAE",
                    "script": "bench_closed_chains.py"})
    for s in scipy:
        if "vs_jaxmb" in s:
            out.append({"what": f"Andrews' squeezer against {s['route']} (tol {s['tol']:g})",
                        "jaxmb": s["vs_jaxmb"].split(" the")[0] + " faster",
                        "alternative": f"{H.ms(s['run_s']):.4g} ms, {s['digits']:.1f} digits",
                        "script": "bench_closed_chains.py"})
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="Andrews: 3 tolerances, Dopri8, Baumgarte 100, no Fourier fit; shoulder: 2 tolerances, batch 8")
    p.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    p.add_argument("--tols", help="Andrews: comma-separated rtol = atol values")
    p.add_argument("--model-as", default="flat", choices=("flat", "constant"))
    p.add_argument("--shoulder-model", help="MoBL-ARMS .osim (default ../shared/models/MOBL_ARMS_fixed_41.osim)")
    p.add_argument("--out-dir", default=str(H.RESULTS))
    a = p.parse_args(argv)
    try:
        sections = H.sections(a.sections, SECTIONS)
    except ValueError as e:
        p.error(str(e))
    run(quick=a.quick, sections=sections, shoulder_model=a.shoulder_model, out_dir=a.out_dir,
        tols=tuple(float(x) for x in a.tols.split(",")) if a.tols else None, model_as=a.model_as)


if __name__ == "__main__":
    main()
