#!/usr/bin/env python
"""Second derivatives of wrapped span lengths through the iterate-derivative rules.

The ellipsoid and torus wraps reproduce OpenSim's iterations (closest-point Newton,
Gauss-Newton tangent points, MINPACK LM), and their derivatives are those of the
iterates (`_iterate_derivative` in jaxmb/_muscles.py, docs/moment_arms.md). This
script checks, for one wrapped span of each kind, that the Hessian of the span
length with respect to both end points (6 x 6)

* by `jax.hessian` (forward over reverse) equals `jax.jacfwd(jax.jacfwd(.))`
  (forward over forward) to 1e-10 relative,
* is symmetric to 1e-10 relative,
* equals central differences of `jax.grad` to 1e-5 relative at one of the steps
  1e-4 ... 1e-7 m (the best is reported with all four). The span is only
  piecewise smooth: OpenSim's discrete choices (iteration counts, the hybrid
  method's switches) make the gradient jump by round-off-sized amounts, so a
  difference step that straddles a jump is wrong by jump / step; at the first
  ellipsoid case below the 1e-4 m step gives 200 (relative), 1e-7 m gives 1e-6.

Not in CI: each case compiles for minutes on a 2-core CPU (the wrap loops are
differentiated twice). Run: `.venv/bin/python scripts/check_wrap_hessians.py`;
exits non-zero when a check fails.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
from _xla_flags import fusion_emitters_off  # noqa: E402

fusion_emitters_off()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxmb import _muscles as M  # noqa: E402

CASES = {
    # kind: wrap parameters (ellipsoid semi-axes; torus inner and outer radius)
    "WrapEllipsoid": np.asarray([0.05, 0.03, 0.04]),
    "WrapTorus": np.asarray([0.01, 0.04]),
}


def _span(kind, prm):
    def length(x):
        return M._span_length(kind, x[:3], x[3:], jnp.asarray(prm), 0, 0)

    return length


def _wrapped_ends(kind, prm, seed=0, tries=200):
    """End points whose straight segment wraps (wrap length > 1 mm)."""
    wrap = jax.jit(lambda a, b: M._WRAP_FN[kind](a, b, jnp.asarray(prm), 0, 0)[3])
    rng = np.random.default_rng(seed)
    for _ in range(tries):
        p1 = rng.uniform(-0.12, 0.12, 3)
        p2 = -p1 + rng.uniform(-0.03, 0.03, 3)
        if float(wrap(jnp.asarray(p1), jnp.asarray(p2))) > 1e-3:
            return np.concatenate([p1, p2])
    raise RuntimeError(f"{kind}: no wrapped segment found")


def check(kind, prm, steps=(1e-4, 1e-5, 1e-6, 1e-7)):
    x = jnp.asarray(_wrapped_ends(kind, prm))
    length = _span(kind, prm)
    h_rev = np.asarray(jax.jit(jax.hessian(length))(x))
    h_fwd = np.asarray(jax.jit(jax.jacfwd(jax.jacfwd(length)))(x))
    grad = jax.jit(jax.grad(length))
    scale = np.max(np.abs(h_fwd))
    fd = {}
    for h in steps:
        h_fd = np.stack([(np.asarray(grad(x + h * e)) - np.asarray(grad(x - h * e))) / (2 * h)
                         for e in np.eye(6)], axis=1)
        fd[h] = np.max(np.abs(h_rev - h_fd)) / scale
    print(f"{kind}: central differences of grad, relative error per step: "
          + ", ".join(f"{h:g} m: {v:.1e}" for h, v in fd.items()))
    errs = {
        "hessian vs jacfwd(jacfwd)": np.max(np.abs(h_rev - h_fwd)) / scale,
        "symmetry": np.max(np.abs(h_rev - h_rev.T)) / scale,
        "vs central differences of grad": min(fd.values()),
    }
    limits = {"hessian vs jacfwd(jacfwd)": 1e-10, "symmetry": 1e-10, "vs central differences of grad": 1e-5}
    ok = all(np.isfinite(v) and v <= limits[k] for k, v in errs.items())
    print(f"{kind}: span {float(length(x)):.6f} m, max |H| {scale:.3e} 1/m; "
          + "; ".join(f"{k} {v:.1e} (<= {limits[k]:.0e})" for k, v in errs.items())
          + ("" if ok else "  FAILED"), flush=True)
    return ok


if __name__ == "__main__":
    results = [check(k, p) for k, p in CASES.items()]
    sys.exit(0 if all(results) else 1)
