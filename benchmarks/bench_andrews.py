#!/usr/bin/env python
"""Andrews' squeezer, 0 <= t <= 0.03 s: wall time at matched accuracy.

Routes: jaxmb embedded ODE in q = (beta,) (diffrax Dopri8, jit; compile timed
separately), jaxmb index-1 DAE in the seven angles (diffrax Dopri8), scipy Radau and
BDF on the same index-1 DAE (jitted JAX right-hand side and Jacobian), scipy DOP853
and Radau on the minimal (embedded) ODE, and 1024 Andrews simulations with perturbed
spring stiffness under jax.vmap. Accuracy: significant digits at t = 0.03 against the
Test Set reference (min over the seven angles of -log10 |rel. error|).

Run: `.venv/bin/python benchmarks/bench_andrews.py [--quick]`; writes
benchmarks/results/andrews.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

import jaxmb as mb  # noqa: E402
from jaxmb import _dae  # noqa: E402
from jaxmb.models import _closed as C  # noqa: E402

REF = np.asarray(C.ANDREWS_REFERENCE_T003)
T1 = 0.03


def digits(angles_hw):
    rel = np.abs(np.asarray(angles_hw) - REF) / np.abs(REF)
    return float(-np.log10(max(rel.max(), 1e-17)))


def timed(fn, repeat=3):
    best = np.inf
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t)
    return best, out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats, batch 256")
    p.add_argument("--tol", type=float, default=1e-10)
    args = p.parse_args(argv)
    tol = args.tol
    batch = 256 if args.quick else 1024
    repeat = 1 if args.quick else 3
    model = C.andrews_squeezer(throw=False)
    perm = np.asarray([C.ANDREWS_ANGLES.index(n) for n in model.joint_names])
    inv = np.argsort(perm)
    q0 = jnp.asarray(C.ANDREWS_Y0[:1])
    z0 = jnp.asarray(C.ANDREWS_Y0)[perm]
    rows = []

    # 1. jaxmb embedded ODE
    def embedded(m):
        sol = mb.simulate(C.without_loads(m), q0, jnp.zeros(1), T1, tau=C.andrews_tau(m), rtol=tol, atol=tol,
                          solver="dopri8")
        return C.andrews_angles(m, sol.q[-1]), sol.stats["num_steps"]

    t = time.perf_counter()
    comp = eqx.filter_jit(embedded).lower(model).compile()
    t_comp = time.perf_counter() - t
    t_run, (ang, steps) = timed(lambda: comp(model), repeat)
    print("embedded done", t_comp, t_run, flush=True)
    rows.append(dict(route="jaxmb embedded ODE (Dopri8, jit)", compile_s=t_comp, run_s=t_run,
                     digits=digits(ang), steps=int(steps), drift=0.0))

    # 2. jaxmb DAE (index 1, Baumgarte 0 and 100)
    for ab in (0.0, 100.0):
        def dae(m, ab=ab):
            s = mb.constraints.simulate_dae(m, z0, jnp.zeros(7), T1, alpha=ab, beta=ab, rtol=tol, atol=tol)
            return s.z[-1], s.drift[-1], s.stats["num_steps"]

        t = time.perf_counter()
        comp = eqx.filter_jit(dae).lower(model).compile()
        t_comp = time.perf_counter() - t
        t_run, (z, drift, steps) = timed(lambda: comp(model), repeat)
        print("dae done", ab, t_comp, t_run, flush=True)
        rows.append(dict(route=f"jaxmb index-1 DAE, Baumgarte a=b={ab:g} (Dopri8, jit)", compile_s=t_comp,
                         run_s=t_run, digits=digits(np.asarray(z)[inv]), steps=int(steps), drift=float(drift)))

    # 3. scipy on the index-1 DAE and on the minimal ODE
    frhs, fjac = _dae.dae_rhs_numpy(model)
    y0 = np.concatenate([np.asarray(z0), np.zeros(7)])
    frhs(0, y0), fjac(0, y0)  # compile
    for method in ("Radau", "BDF"):
        t = time.perf_counter()
        r = solve_ivp(frhs, (0, T1), y0, method=method, rtol=tol, atol=tol, jac=fjac)
        el = time.perf_counter() - t
        phi = mb.constraints.loop_constraints(model)
        print("scipy dae done", method, el, flush=True)
        rows.append(dict(route=f"scipy {method}, index-1 DAE", compile_s=0.0, run_s=el,
                         digits=digits(r.y[:7, -1][inv]), steps=int(r.t.size - 1),
                         drift=float(np.max(np.abs(np.asarray(phi(jnp.asarray(r.y[:7, -1]))))))))
    orhs, ojac = _dae.ode_rhs_numpy(model)
    y0 = np.asarray([C.ANDREWS_Y0[0], 0.0])
    orhs(0, y0), ojac(0, y0)
    ang_of = eqx.filter_jit(lambda m, q: C.andrews_angles(m, q))
    for method in ("DOP853", "Radau"):
        t = time.perf_counter()
        r = solve_ivp(orhs, (0, T1), y0, method=method, rtol=tol, atol=tol,
                      **({"jac": ojac} if method == "Radau" else {}))
        el = time.perf_counter() - t
        print("scipy ode done", method, el, flush=True)
        rows.append(dict(route=f"scipy {method}, embedded ODE (jaxmb RHS)", compile_s=0.0, run_s=el,
                         digits=digits(ang_of(model, jnp.asarray(r.y[:1, -1]))), steps=int(r.t.size - 1),
                         drift=0.0))

    # 4. batch: perturbed spring stiffness under vmap
    key = jax.random.PRNGKey(0)
    scale = 1.0 + 0.05 * jax.random.normal(key, (batch,))

    def one(m, s):
        m = eqx.tree_at(lambda mm: mm.loads[1].stiffness, m, m.loads[1].stiffness * s)
        sol = mb.simulate(C.without_loads(m), q0, jnp.zeros(1), T1, tau=C.andrews_tau(m), rtol=1e-8, atol=1e-8,
                          solver="dopri8")
        return sol.q[-1, 0]

    batched = eqx.filter_jit(eqx.filter_vmap(one, in_axes=(None, 0)))
    t = time.perf_counter()
    comp = batched.lower(model, scale).compile()
    t_comp = time.perf_counter() - t
    t_run, betas = timed(lambda: comp(model, scale), 1)
    rows.append(dict(route=f"jaxmb embedded ODE, vmap over {batch} spring stiffnesses (rtol 1e-8)",
                     compile_s=t_comp, run_s=t_run, digits=float("nan"), steps=0, drift=0.0,
                     per_sim_ms=1e3 * t_run / batch, beta_spread=float(np.ptp(np.asarray(betas)))))

    print(f"\nAndrews' squeezer 0..{T1} s, rtol = atol = {tol:g}, float64, {jax.devices()[0].device_kind}")
    print(f"{'route':<62} {'compile s':>9} {'run s':>8} {'digits':>6} {'steps':>6} {'drift':>9}")
    for r in rows:
        print(f"{r['route']:<62} {r['compile_s']:9.2f} {r['run_s']:8.3f} {r['digits']:6.2f} {r['steps']:6d} "
              f"{r['drift']:9.1e}")
    out = Path(__file__).parent / "results" / "andrews.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(dict(problem="andrews_squeezer", t1=T1, tol=tol, dtype="float64",
                                   device=str(jax.devices()[0]), machine=platform.platform(),
                                   cpu_count=os.cpu_count(), batch=batch, rows=rows), indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
