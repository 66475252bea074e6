#!/usr/bin/env python
"""Andrews' squeezer, 0 <= t <= 0.03 s: wall time at matched accuracy, single and batched.

Routes, all in one run:

* jaxmb embedded ODE in q = (beta,) with the six other angles implicit (LoopClosure:
  Newton from a closed-form guess, derivatives by implicit differentiation);
* jaxmb embedded ODE with the implicit joint functions pre-modeled over one crank
  revolution (`mb.constraints.premodeled`): by Fourier series of order 24, and by
  periodic quintic splines at 512 intervals (fit errors printed);
* jaxmb index-1 DAE in the seven angles with Lagrange multipliers (Baumgarte 0 and
  100), the same diffrax solver (Dopri8), at rtol = tol, tol/3 and tol/10 (the
  matched-accuracy comparison takes the fastest DAE run with as many digits as
  the embedded route);
* scipy Radau and BDF on the same index-1 DAE, scipy DOP853 and Radau on the
  embedded ODE (jitted JAX right-hand sides);
* batches: `--batch` simulations with perturbed spring stiffness under jax.vmap, for
  the two embedded forms and the DAE at its matched setting (per-simulation cost).

Accuracy: significant digits at t = 0.03 against the Test Set reference (min over the
seven angles of -log10 |relative error|). Compile times are reported separately;
run times are the best of `--repeat` runs.

Run: `.venv/bin/python benchmarks/bench_andrews.py [--quick]`; writes
benchmarks/results/andrews.json.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import time
from pathlib import Path

from _xla_flags import fusion_emitters_off  # noqa: E402

fusion_emitters_off()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
# Compile times are reported: no persistent compilation cache (JAX_COMPILATION_CACHE_DIR).
jax.config.update("jax_compilation_cache_dir", None)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.flatten_util import ravel_pytree  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

import jaxmb as mb  # noqa: E402
from jaxmb import models as C  # noqa: E402

REF = np.asarray(C.ANDREWS_REFERENCE_T003)
T1 = 0.03


def scaled_stiffness(model, scale):
    """Andrews' squeezer with its spring (the model's second load) `scale` times as stiff."""
    return eqx.tree_at(lambda m: m.loads[1].stiffness, model, model.loads[1].stiffness * scale)


def endpoint_digits(angles, reference):
    """Significant digits of the seven angles against `reference`: ``-log10`` of the worst
    angle's relative error (17 for an exact match)."""
    rel = np.abs(np.asarray(angles) - reference) / np.abs(reference)
    return float(-np.log10(max(rel.max(), 1e-17)))


def digits(angles_hw):
    """Significant digits of the seven angles (Hairer & Wanner's order) at t = 0.03 against
    the Test Set's published solution."""
    return endpoint_digits(angles_hw, REF)


def premodeled_andrews(model, order=24):
    """``(model, fit errors)``: Andrews' squeezer with its six dependent angles pre-modeled
    by Fourier series of `order` over one crank revolution (512 samples), as every Andrews
    benchmark and check uses it (order 24: fit error 2e-15 rad)."""
    return mb.constraints.premodeled(model, 0.0, 2 * np.pi, 2 * np.pi / 512, kind="fourier", order=order)


def quintic_andrews(model, intervals=512):
    """``(model, fit errors)``: Andrews' squeezer with its six dependent angles pre-modeled
    by periodic quintic splines (`mb.QuinticSpline`) through the loop's values and exact
    first and second derivatives at the knots of `intervals` equal steps over one crank
    revolution (512: fit error 1e-15 rad, second derivatives within 7e-11)."""
    return mb.constraints.premodeled(model, 0.0, 2 * np.pi, 2 * np.pi / intervals, kind="quintic", periodic=True)


def timed(fn, repeat=3):
    best = np.inf
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t)
    return best, out


def model_as_vector(model):
    """``(vector, rebuild)``: the model's arrays as one flat vector, and ``rebuild(vector)``
    the model again (inside a jit: slices of the vector, nothing copied per call).

    Why: a compiled call with the model's ~90 arrays as separate arguments costs about
    0.1 ms more in dispatch alone (83 against 12 µs for an empty function on this VM,
    scripts/check_dispatch_cost.py),
    and ``eqx.filter_jit`` adds as much again in Python; that is JAX's runtime, paid per
    call by every route alike, not simulation."""
    params, static = eqx.partition(model, eqx.is_array)
    flat, unravel = ravel_pytree(params)
    return flat, lambda vector: eqx.combine(unravel(vector), static)


def compiled(fn, model, *args):
    """``(run, compile seconds)``: ``run()`` calls ``fn(model, *args)`` compiled, with the
    model's arrays passed as one flat vector (:func:`model_as_vector`) and the other
    arrays among `args` as arguments (non-arrays are compiled in)."""
    flat, rebuild = model_as_vector(model)
    dynamic, fixed = eqx.partition(args, eqx.is_array)
    t = time.perf_counter()
    comp = jax.jit(lambda p, d: fn(rebuild(p), *eqx.combine(d, fixed))).lower(flat, dynamic).compile()
    return functools.partial(comp, flat, dynamic), time.perf_counter() - t


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats, batch 64, no scipy Radau on the DAE")
    p.add_argument("--tol", type=float, default=1e-10)
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "andrews.json"))
    args = p.parse_args(argv)
    tol = args.tol
    batch = 64 if args.quick else args.batch
    repeat = 2 if args.quick else args.repeat
    model = C.andrews_squeezer(throw=False)
    t = time.perf_counter()
    fourier, fit_error = premodeled_andrews(model)
    t_fit = time.perf_counter() - t
    print(f"pre-modeled in {t_fit:.1f} s, max fit error {float(jnp.max(fit_error)):.1e} rad", flush=True)
    quintic, quintic_error = quintic_andrews(model)
    print(f"pre-modeled by quintic splines, max fit error {float(jnp.max(quintic_error)):.1e} rad", flush=True)
    perm = np.asarray([C.ANDREWS_ANGLES.index(n) for n in model.joint_names])
    inv = np.argsort(perm)
    q0 = jnp.asarray(C.ANDREWS_Y0[:1])
    z0 = jnp.asarray(C.ANDREWS_Y0)[perm]
    rows = []

    def add(route, compile_s, run_s, angles, steps, drift, **extra):
        rows.append(dict(route=route, compile_s=compile_s, run_s=run_s, digits=digits(angles), steps=int(steps),
                         drift=float(drift), **extra))
        print(f"{route}: {run_s * 1e3:.1f} ms", flush=True)

    # 1. jaxmb embedded ODEs (the spring and the driving torque are loads of the model)
    def embedded(m, tol):
        sol = mb.simulate(m, q0, jnp.zeros(1), T1, rtol=tol, atol=tol, solver="dopri8")
        return C.andrews_angles(m, sol.q[-1]), sol.stats["num_steps"]

    for label, m in (("implicit joint functions", model), ("pre-modeled Fourier joint functions", fourier),
                     ("pre-modeled quintic joint functions", quintic)):
        comp, t_comp = compiled(embedded, m, tol)
        t_run, (ang, steps) = timed(comp, repeat)
        add(f"jaxmb embedded ODE, {label} (Dopri8)", t_comp, t_run, ang, steps, 0.0)

    # 2. jaxmb DAE (index 1, Baumgarte 0 and 100), at tol and tighter
    def dae(m, ab, tol):
        s = mb.constraints.simulate_dae(m, z0, jnp.zeros(7), T1, alpha=ab, beta=ab, rtol=tol, atol=tol)
        return s.z[-1], s.drift[-1], s.stats["num_steps"]

    # A tolerance sweep, so that the DAE gets its cheapest setting at the embedded
    # route's accuracy (matched below).
    dae_settings = {}
    for ab in (0.0, 100.0):
        for tl in (tol, tol / 3, tol / 10):
            comp, t_comp = compiled(dae, model, ab, tl)
            t_run, (z, drift, steps) = timed(comp, repeat)
            route = f"jaxmb index-1 DAE, Baumgarte {ab:g}, rtol {tl:.2g} (Dopri8)"
            add(route, t_comp, t_run, np.asarray(z)[inv], steps, drift, alpha=ab, rtol=tl)
            dae_settings[route] = (ab, tl)

    # 3. scipy on the index-1 DAE and on the minimal ODE
    frhs, fjac = mb.constraints.dae_rhs_numpy(model)
    y0 = np.concatenate([np.asarray(z0), np.zeros(7)])
    frhs(0, y0), fjac(0, y0)  # compile
    phi = jax.jit(mb.constraints.loop_constraints(model))
    for method in (("BDF",) if args.quick else ("Radau", "BDF")):
        t = time.perf_counter()
        r = solve_ivp(frhs, (0, T1), y0, method=method, rtol=tol, atol=tol, jac=fjac)
        el = time.perf_counter() - t
        add(f"scipy {method}, index-1 DAE", 0.0, el, r.y[:7, -1][inv], r.t.size - 1,
            np.max(np.abs(np.asarray(phi(jnp.asarray(r.y[:7, -1]))))))
    orhs, ojac = mb.constraints.ode_rhs_numpy(model)
    y0 = np.asarray([C.ANDREWS_Y0[0], 0.0])
    orhs(0, y0), ojac(0, y0)
    ang_of = eqx.filter_jit(lambda m, q: C.andrews_angles(m, q))
    for method in ("DOP853", "Radau"):
        t = time.perf_counter()
        r = solve_ivp(orhs, (0, T1), y0, method=method, rtol=tol, atol=tol,
                      **({"jac": ojac} if method == "Radau" else {}))
        el = time.perf_counter() - t
        add(f"scipy {method}, embedded ODE (jaxmb RHS)", 0.0, el, ang_of(model, jnp.asarray(r.y[:1, -1])),
            r.t.size - 1, 0.0)

    # 4. batches: perturbed spring stiffness under vmap, per-simulation cost
    scale = 1.0 + 0.05 * jax.random.normal(jax.random.PRNGKey(0), (batch,))

    def one_embedded(m, s):
        sol = mb.simulate(scaled_stiffness(m, s), q0, jnp.zeros(1), T1, rtol=tol, atol=tol, solver="dopri8", throw=False)
        return C.andrews_angles(m, sol.q[-1]), sol.stats["num_steps"]

    # The batched DAE runs at the setting that matches the embedded route's accuracy
    # in the single runs (the fastest DAE row with as many digits).
    emb_digits = rows[0]["digits"]
    matched = [r for r in rows if r["route"] in dae_settings and r["digits"] >= emb_digits - 0.05]
    ab_b, tol_b = dae_settings[min(matched, key=lambda r: r["run_s"])["route"]] if matched else (0.0, tol / 10)

    def one_dae(m, s):
        sol = mb.constraints.simulate_dae(scaled_stiffness(m, s), z0, jnp.zeros(7), T1, alpha=ab_b, beta=ab_b, rtol=tol_b,
                                          atol=tol_b)
        return sol.z[-1][inv], sol.stats["num_steps"]

    for label, fn, m in (("embedded ODE, implicit", one_embedded, model),
                         ("embedded ODE, pre-modeled Fourier", one_embedded, fourier),
                         ("embedded ODE, pre-modeled quintic", one_embedded, quintic),
                         (f"index-1 DAE, Baumgarte {ab_b:g}, rtol {tol_b:.2g}", one_dae, model)):
        comp, t_comp = compiled(eqx.filter_vmap(fn, in_axes=(None, 0)), m, scale)
        t_run, (ang, steps) = timed(comp, 1)
        nominal = int(np.argmin(np.abs(np.asarray(scale) - 1.0)))
        rows.append(dict(route=f"jaxmb {label}: vmap over {batch} spring stiffnesses", compile_s=t_comp,
                         run_s=t_run, per_sim_ms=1e3 * t_run / batch, digits=float("nan"),
                         steps=int(np.max(np.asarray(steps))), drift=float("nan"),
                         beta_spread=float(np.ptp(np.asarray(ang)[:, 0])), batch=batch,
                         nominal_scale=float(scale[nominal])))
        print(f"batch {label}: {1e3 * t_run / batch:.2f} ms/sim", flush=True)

    print(f"\nAndrews' squeezer 0..{T1} s, rtol = atol = {tol:g} unless stated, float64, "
          f"{jax.devices()[0].device_kind}, {os.cpu_count()} CPUs; pre-model fit errors "
          f"{float(jnp.max(fit_error)):.1e} (Fourier), {float(jnp.max(quintic_error)):.1e} rad (quintic)")
    print(f"{'route':<74} {'compile s':>9} {'run ms':>9} {'digits':>6} {'steps':>6} {'drift':>9}")
    for r in rows:
        run = r.get("per_sim_ms", r["run_s"] * 1e3)
        tag = "/sim" if "per_sim_ms" in r else ""
        print(f"{r['route']:<74} {r['compile_s']:9.2f} {run:9.2f}{tag} {r['digits']:6.2f} {r['steps']:6d} "
              f"{r['drift']:9.1e}")
    emb = {r["route"]: r for r in rows}
    best_emb = min((r for r in rows if r["route"].startswith("jaxmb embedded")), key=lambda r: r["run_s"])
    daes = [r for r in rows if "DAE" in r["route"] and "per_sim_ms" not in r and r["route"].startswith("jaxmb")
            and r["digits"] >= best_emb["digits"] - 0.05]
    summary = {}
    if daes:
        fastest_dae = min(daes, key=lambda r: r["run_s"])
        summary["speedup_vs_jaxmb_dae_matched"] = fastest_dae["run_s"] / best_emb["run_s"]
        print(f"\nembedded ({best_emb['digits']:.2f} digits) vs fastest jaxmb DAE with as many digits "
              f"({fastest_dae['route']}, {fastest_dae['digits']:.2f}): "
              f"{summary['speedup_vs_jaxmb_dae_matched']:.1f}x")
    scipy_dae = [r for r in rows if r["route"].startswith("scipy") and "DAE" in r["route"]
                 and r["digits"] >= best_emb["digits"] - 0.05]
    if scipy_dae:
        fastest = min(scipy_dae, key=lambda r: r["run_s"])
        summary["speedup_vs_scipy_dae"] = fastest["run_s"] / best_emb["run_s"]
        print(f"embedded vs fastest scipy DAE with as many digits ({fastest['route']}, {fastest['digits']:.2f}): "
              f"{summary['speedup_vs_scipy_dae']:.0f}x")
    else:
        print("no scipy DAE run reached the embedded route's accuracy")
    batched = {r["route"].split(":")[0]: r["per_sim_ms"] for r in rows if "per_sim_ms" in r}
    print("batched ms/simulation:", {k: round(v, 3) for k, v in batched.items()})
    emb_b = [v for k, v in batched.items() if "embedded ODE, implicit" in k]
    dae_b = [v for k, v in batched.items() if "DAE" in k]
    if emb_b and dae_b:
        summary["batched_speedup_vs_jaxmb_dae_matched"] = dae_b[0] / emb_b[0]
        print(f"batched: embedded (implicit) vs DAE at matched setting: "
              f"{summary['batched_speedup_vs_jaxmb_dae_matched']:.1f}x")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(dict(problem="andrews_squeezer", t1=T1, tol=tol, dtype="float64",
                                   device=str(jax.devices()[0]), jax=jax.__version__,
                                   xla_flags=os.environ.get("XLA_FLAGS", ""), machine=platform.platform(),
                                   cpu_count=os.cpu_count(), batch=batch, fit_error=float(jnp.max(fit_error)),
                                   quintic_fit_error=float(jnp.max(quintic_error)),
                                   premodel_s=t_fit, rows=rows, summary=summary), indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
