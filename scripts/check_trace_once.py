#!/usr/bin/env python
"""What tracing the vector field once per solve (``jaxmb._simulate._TracedOnce``) saves,
and that it leaves the compiled program as it was.

For Andrews' squeezer, Dopri8, 0..0.03 s: the embedded ODE with implicit loop joint
functions, the same pre-modeled by periodic quintic splines (512 intervals), and the
index-1 DAE (Baumgarte 100). Each is one ``jax.jit`` of the solve; printed: trace and
lower time, compile time, and whether the optimised HLO's count of every operation and
the end state are the same with and without ``_TracedOnce`` (without: its ``__call__``
patched to call the field directly). Each variant runs in a fresh process.

Run: ``taskset -c 1 .venv/bin/python scripts/check_trace_once.py`` (about 1 min).
"""

import collections
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
from _xla_flags import fusion_emitters_off  # noqa: E402

fusion_emitters_off()


def measure(traced_once: bool) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    import jaxmb as mb
    from jaxmb import _simulate
    from jaxmb.models import _closed as C

    if not traced_once:
        _simulate._TracedOnce.__call__ = lambda self, t, y, args: self.field(t, y, args)
    model = mb.models.andrews_squeezer(throw=False)
    quintic, _ = mb.constraints.premodeled(model, 0.0, 2 * np.pi, 2 * np.pi / 512, kind="quintic", periodic=True)
    q0 = jnp.asarray([C.ANDREWS_Y0[C.ANDREWS_ANGLES.index(model.coordinate_names[0])]])
    perm = jnp.asarray([C.ANDREWS_ANGLES.index(n) for n in model.joint_names])
    z0 = jnp.asarray(C.ANDREWS_Y0)[perm]
    runs = {
        "embedded, implicit loop": (lambda q: mb.simulate(model, q, jnp.zeros(1), 0.03, rtol=1e-7, atol=1e-7,
                                                           solver="dopri8", throw=False).q[-1], q0),
        "embedded, quintic pre-model": (lambda q: mb.simulate(quintic, q, jnp.zeros(1), 0.03, rtol=1e-7, atol=1e-7,
                                                               solver="dopri8", throw=False).q[-1], q0),
        "index-1 DAE, Baumgarte 100": (lambda z: mb.constraints.simulate_dae(
            model, z, jnp.zeros(7), 0.03, alpha=100.0, beta=100.0, rtol=1e-7, atol=1e-7).z[-1], z0),
    }
    out = {}
    for name, (fn, arg) in runs.items():
        t0 = time.perf_counter()
        lowered = jax.jit(fn).lower(arg)
        t1 = time.perf_counter()
        compiled = lowered.compile()
        t2 = time.perf_counter()
        ops = collections.Counter(re.findall(r"= [a-z0-9\[\]{},]+ ([a-z\-]+)\(", compiled.as_text()))
        out[name] = dict(lower_s=t1 - t0, compile_s=t2 - t1, ops=dict(ops),
                         end=np.asarray(compiled(arg)).tolist())
    return out


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("--once", "--every"):
        print(json.dumps(measure(sys.argv[1] == "--once")))
        return
    res = {}
    for mode in ("--every", "--once"):
        done = subprocess.run([sys.executable, __file__, mode], check=True, capture_output=True, text=True)
        res[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{'solve':30s} {'lower s, every':>15s} {'lower s, once':>14s} {'compile s, every':>17s} "
          f"{'compile s, once':>16s}  same HLO ops  same end state")
    for name in res["--once"]:
        a, b = res["--every"][name], res["--once"][name]
        print(f"{name:30s} {a['lower_s']:15.2f} {b['lower_s']:14.2f} {a['compile_s']:17.2f} {b['compile_s']:16.2f}"
              f"  {str(a['ops'] == b['ops']):12s}  {a['end'] == b['end']}")


if __name__ == "__main__":
    main()
