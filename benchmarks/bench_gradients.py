"""What a derivative costs, as a multiple of the value it differentiates.

- Through a simulation: Andrews' squeezer, 0..0.03 s, Dopri8 at rtol = atol = 1e-8, the
  loss β(0.03). Derivatives with respect to one parameter (the model's first
  floating-point array in pytree order, the first body's mass, scaled by 1 + p) by
  forward mode (``jax.jacfwd`` with ``adjoint=diffrax.ForwardMode()``) and by reverse
  mode (``jax.grad``, diffrax's default checkpointed adjoint), and with respect to
  every array of the model (reverse mode).
  Forward and reverse derivatives must agree to 1e-6 relative.
- Through the dynamics: `forward_dynamics` of `planar_chain(7)` at one state, its
  Jacobian in q (``jax.jacfwd``) and the gradient of Σ qdd in every array of the model.

Each is ``jax.jit`` compiled apart and timed in interleaved rounds.

    python benchmarks/bench_gradients.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import _harness as H  # noqa: E402  (sets XLA flags and x64 before jax)

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.flatten_util import ravel_pytree  # noqa: E402

import jaxmb as mb  # noqa: E402
from benchmarks.bench_closed_chains import BETA0, andrews_models  # noqa: E402


def simulation_problems(kinds, t1=0.03, tol=1e-8):
    """``{name: (flat model vector, loss(vector, p, adjoint))}``: β(t1) (the first joint
    value) of the model rebuilt from the vector, its first floating-point array (in
    pytree order: the first body's mass) scaled by 1 + p. Only that array depends on p, so a derivative
    in p carries no cotangents of the other arrays."""
    out = {}
    if "pendulum" in kinds:  # the smallest problem (tests)
        out["double pendulum, 0.1 s"] = (mb.models.double_pendulum(), jnp.array([0.3, -0.2]), 0.1)
    models = andrews_models(fourier="fourier" in kinds, quintic="quintic" in kinds)
    for kind in ("implicit", "quintic", "fourier"):
        if kind in kinds:
            out[f"Andrews, {kind}"] = (models[kind], jnp.array([BETA0]), t1)
    problems = {}
    for name, (model, q0, t1_) in out.items():
        params, static = eqx.partition(model, eqx.is_inexact_array)
        flat, unravel = ravel_pytree(params)

        def loss(v, p, adjoint, unravel=unravel, static=static, q0=q0, t1_=t1_):
            leaves, tree = jax.tree_util.tree_flatten(unravel(v))
            m = eqx.combine(jax.tree_util.tree_unflatten(tree, [leaves[0] * (1.0 + p)] + leaves[1:]), static)
            s = mb.simulate(m, q0, jnp.zeros_like(q0), t1_, rtol=tol, atol=tol, solver="dopri8", adjoint=adjoint)
            return mb.joint_values(m, s.q[-1])[0]
        problems[name] = (flat, loss)
    return problems


def run(quick=False, kinds=None, chain=None, rounds=None, out_dir=H.RESULTS):
    kinds = kinds or (("quintic",) if quick else ("implicit", "quintic", "fourier"))
    chain = chain or 7
    rounds = rounds or (3 if quick else 5)
    reverse = diffrax.RecursiveCheckpointAdjoint()
    calls, compile_s, rows, notes = {}, {}, [], []
    p0 = jnp.asarray(0.0)
    for name, (flat, loss) in simulation_problems(kinds).items():
        variants = {
            "value": lambda v, p, loss=loss: loss(v, p, reverse),
            "forward mode, 1 parameter": lambda v, p, loss=loss: jax.jacfwd(
                lambda x: loss(v, x, diffrax.ForwardMode()))(p),
            "reverse mode, 1 parameter": lambda v, p, loss=loss: jax.grad(lambda x: loss(v, x, reverse))(p),
            f"reverse mode, all {flat.size} entries of the model": lambda v, p, loss=loss: jax.grad(
                lambda x: loss(x, p, reverse))(v),
        }
        for what, fn in variants.items():
            comp, lo, co = H.compile_apart(fn, flat, p0)
            calls[(name, what)] = lambda comp=comp, flat=flat: comp(flat, p0)
            compile_s[(name, what)] = lo + co
        fwd, rev = (float(calls[(name, w)]()) for w in ("forward mode, 1 parameter", "reverse mode, 1 parameter"))
        if abs(fwd - rev) > 1e-6 * max(1.0, abs(rev)) + 1e-9:
            raise AssertionError(f"{name}: forward-mode derivative {fwd} differs from reverse mode {rev}")
        notes.append(f"{name}: d loss / d p = {rev:.6g} (forward and reverse mode agree to {abs(fwd - rev):.1e})")
    model = mb.models.planar_chain(chain)
    rng = np.random.default_rng(0)
    q, qd, tau = (jnp.asarray(rng.uniform(-a, a, chain)) for a in (np.pi, 2.0, 5.0))
    name = f"planar_chain({chain}) forward dynamics"
    variants = {
        "value": lambda m: mb.forward_dynamics(m, q, qd, tau),
        "jax.jacfwd in q": lambda m: jax.jacfwd(lambda x: mb.forward_dynamics(m, x, qd, tau))(q),
        "reverse mode, all arrays of the model": lambda m: eqx.filter_grad(
            lambda mm: jnp.sum(mb.forward_dynamics(mm, q, qd, tau)))(m),
    }
    for what, fn in variants.items():
        comp, lo, co = H.compile_apart(fn, model)
        calls[(name, what)] = lambda comp=comp: comp(model)
        compile_s[(name, what)] = lo + co
    timed = H.time_calls(calls, rounds=rounds, min_time=0.02)
    for (problem, what), t in timed.items():
        base = timed[(problem, "value")]["best_s"]
        rows.append(dict(problem=problem, derivative=what, compile_s=compile_s[(problem, what)],
                         ms=H.ms(t["best_s"]), times_value=t["best_s"] / base))
    result = {"meta": H.meta("gradients", quick=quick, kinds=list(kinds), rounds=rounds), "rows": rows,
              "notes": notes, "headline": headline(rows)}
    table = H.markdown_table(rows, [("problem", "problem"), ("derivative", "derivative"), ("compile_s", "compile s"),
                                    ("ms", "ms"), ("times_value", "× value")])
    return H.write(result, out_dir, table)


def headline(rows):
    sims = [r for r in rows if r["problem"].startswith("Andrews")]
    if not sims:
        return []
    problem = sims[0]["problem"]
    by = {r["derivative"]: r["times_value"] for r in sims if r["problem"] == problem}
    full = next(v for k, v in by.items() if k.startswith("reverse mode, all"))
    return [{"what": f"{problem} (Dopri8, 1e-8): a derivative through the simulation, × one simulation",
             "jaxmb": f"forward mode {by['forward mode, 1 parameter']:.1f}x, "
                      f"reverse {by['reverse mode, 1 parameter']:.1f}x (1 parameter); whole model {full:.1f}x",
             "alternative": "", "script": "bench_gradients.py"}]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="the quintic pre-modeled squeezer only, 3 rounds")
    p.add_argument("--out-dir", default=str(H.RESULTS))
    a = p.parse_args(argv)
    run(quick=a.quick, out_dir=a.out_dir)


if __name__ == "__main__":
    main()
