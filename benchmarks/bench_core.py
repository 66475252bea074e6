#!/usr/bin/env python
"""Core-engine benchmark: mass matrix, bias forces and forward dynamics.

Compares jaxmb with Pinocchio, MuJoCo (C) and MJX on `planar_chain(n)`: n
uniform rods (length 1 m, mass 1 kg, inertia m l^2/12 about the two axes
perpendicular to the rod) chained by revolute joints about z, each rod hanging
along -y of its body frame, gravity (0, -9.81, 0).

For jaxmb and MJX it times, separately, compilation (`jax.jit(f).lower(*args)`
then `.compile()`) and execution (`block_until_ready` after every call), for a
single jitted call and under `jax.vmap` for a range of batch sizes. Pinocchio
and MuJoCo are timed per call in a Python loop. Before timing, it checks that
all the libraries give the same M(q), bias(q, qd) and qdd for a random state.

Run: `.venv/bin/python benchmarks/bench_core.py [--quick] [--dtype float32]`.
See benchmarks/README.md for what the columns mean.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from _xla_flags import FUSION_EMITTERS_OFF as FUSION_FLAG  # noqa: E402
from _xla_flags import fusion_emitters_off  # noqa: E402

QUANTITIES = ("mass_matrix", "bias_forces", "forward_dynamics")
# Not a dynamics quantity: a jitted `q + qd` that takes the same arguments
# (model pytree included), i.e. the floor set by JAX's per-call dispatch.
DISPATCH = "dispatch_floor"
DISPATCH_DESC = "jax.jit(lambda model, q, qd, tau: q + qd): per-call dispatch cost with the same arguments"

DEFAULT_NS = (2, 7, 20)
DEFAULT_BATCHES = (1, 8, 64, 512, 4096, 8192)
QUICK_NS = (2,)
QUICK_BATCHES = (1024,)

LENGTH = 1.0
MASS = 1.0
GRAVITY = 9.81


# --------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------
def _int_list(text: str) -> tuple[int, ...]:
    return tuple(int(t) for t in text.replace(",", " ").split())


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--quick", action="store_true",
                   help=f"reduced set (n={QUICK_NS}, batches={QUICK_BATCHES}, "
                        "shorter timing loops); runs in under a minute")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                   help="JAX dtype (Pinocchio and MuJoCo always use float64)")
    p.add_argument("--n", type=_int_list, default=None,
                   help="chain lengths, e.g. '2,7,20' (default: %s)" % (DEFAULT_NS,))
    p.add_argument("--batch-sizes", type=_int_list, default=None,
                   help="vmap batch sizes (default: %s)" % (DEFAULT_BATCHES,))
    p.add_argument("--libs", default="jaxmb,pinocchio,mujoco,mjx",
                   help="comma-separated subset of jaxmb,pinocchio,mujoco,mjx")
    p.add_argument("--quantities", default=",".join(QUANTITIES),
                   help="comma-separated subset of " + ",".join(QUANTITIES))
    p.add_argument("--repeats", type=int, default=None,
                   help="timing repeats per configuration (default 7, quick 3)")
    p.add_argument("--min-time", type=float, default=None,
                   help="target seconds per repeat (default 0.1, quick 0.02)")
    p.add_argument("--model-const", action="store_true",
                   help="close the jitted functions over the model (XLA may "
                        "constant-fold it) instead of passing it as an argument")
    fe = p.add_mutually_exclusive_group()
    fe.add_argument("--no-fusion-emitters", dest="no_fusion_emitters",
                    action="store_true", default=True,
                    help=f"set XLA_FLAGS={FUSION_FLAG} before importing jax "
                         "(default on: XLA's CPU fusion emitters make MJX's "
                         "tree code ~55x slower with jax 0.10)")
    fe.add_argument("--fusion-emitters", dest="no_fusion_emitters",
                    action="store_false",
                    help="keep XLA's default (fusion emitters on)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "core.json"),
                   help="JSON output path")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--check-only", action="store_true",
                   help="only run the agreement check between the libraries, no timing")
    args = p.parse_args(argv)
    if args.n is None:
        args.n = QUICK_NS if args.quick else DEFAULT_NS
    if args.batch_sizes is None:
        args.batch_sizes = QUICK_BATCHES if args.quick else DEFAULT_BATCHES
    if args.repeats is None:
        args.repeats = 3 if args.quick else 7
    if args.min_time is None:
        args.min_time = 0.02 if args.quick else 0.1
    args.libs = tuple(s.strip() for s in args.libs.split(",") if s.strip())
    args.quantities = tuple(s.strip() for s in args.quantities.split(",") if s.strip())
    for q in args.quantities:
        if q not in QUANTITIES:
            p.error(f"unknown quantity {q!r}")
    return args


# --------------------------------------------------------------------------
# timing helpers
# --------------------------------------------------------------------------
def _time_loop(call, repeats: int, min_time: float, max_number: int = 200_000):
    """timeit-style: warm up, pick a loop count so a repeat lasts ~min_time,
    return (number, per-call seconds of each repeat)."""
    perf = time.perf_counter
    for _ in range(3):
        call()
    t0 = perf()
    call()
    one = max(perf() - t0, 1e-7)
    number = int(min(max_number, max(1, math.ceil(min_time / one))))
    per_call = []
    for _ in range(repeats):
        t0 = perf()
        for _ in range(number):
            call()
        per_call.append((perf() - t0) / number)
    return number, per_call


def _summary(per_call, batch):
    best = min(per_call)
    med = statistics.median(per_call)
    states = batch or 1
    return {
        "us_per_call_best": best * 1e6,
        "us_per_call_median": med * 1e6,
        "us_per_state_best": best * 1e6 / states,
        "us_per_state_median": med * 1e6 / states,
    }


# --------------------------------------------------------------------------
# reference models
# --------------------------------------------------------------------------
def pinocchio_chain(pin, np, n, length=LENGTH, mass=MASS, g=GRAVITY):
    """planar_chain(n) as a pinocchio.Model: RZ joints, the first at the
    origin, each next one at (0, -l, 0) of its parent; rod inertia about its
    centre diag(m l^2/12, 0, m l^2/12) (zero about the rod's own axis y)."""
    model = pin.Model()
    model.gravity = pin.Motion(np.array([0.0, -g, 0.0]), np.zeros(3))
    parent = 0
    i_rod = mass * length**2 / 12.0
    for i in range(n):
        placement = pin.SE3(np.eye(3), np.array([0.0, 0.0 if i == 0 else -length, 0.0]))
        jid = model.addJoint(parent, pin.JointModelRZ(), placement, f"joint{i + 1}")
        inertia = pin.Inertia(mass, np.array([0.0, -length / 2, 0.0]),
                              np.diag([i_rod, 0.0, i_rod]))
        model.appendBodyToJoint(jid, inertia, pin.SE3.Identity())
        parent = jid
    return model


# MuJoCo rejects a zero principal inertia, so the rod's inertia about its own
# axis (y) is set to this tiny value. With every hinge about z the angular
# velocity is always along z, so I_yy never enters M, bias or qdd.
MJ_IYY = 1e-12


def mujoco_xml(n, length=LENGTH, mass=MASS, g=GRAVITY):
    """planar_chain(n) as MJCF: hinge joints about z, explicit inertials, no
    contacts, zero damping and armature."""
    i_rod = mass * length**2 / 12.0
    body = ""
    for i in reversed(range(n)):
        pos = "0 0 0" if i == 0 else f"0 {-length!r} 0"
        body = (
            f'<body name="rod{i + 1}" pos="{pos}">'
            f'<joint name="joint{i + 1}" type="hinge" axis="0 0 1" damping="0" armature="0" '
            f'frictionloss="0" stiffness="0" limited="false"/>'
            f'<inertial pos="0 {-length / 2!r} 0" mass="{mass!r}" '
            f'diaginertia="{i_rod!r} {MJ_IYY!r} {i_rod!r}"/>'
            f"{body}</body>"
        )
    return (
        f'<mujoco model="planar_chain_{n}">'
        '<compiler angle="radian" inertiafromgeom="false"/>'
        f'<option gravity="0 {-g!r} 0" timestep="0.001">'
        '<flag contact="disable" constraint="disable"/></option>'
        f"<worldbody>{body}</worldbody></mujoco>"
    )


def mujoco_full_m(mujoco, np, m, d):
    out = np.zeros((m.nv, m.nv))
    try:  # MuJoCo >= 4: mj_fullM(m, d, dst)
        mujoco.mj_fullM(m, d, out)
    except TypeError:  # MuJoCo 3: mj_fullM(m, dst, qM)
        mujoco.mj_fullM(m, out, d.qM)
    return out


# --------------------------------------------------------------------------
# library loading (each optional)
# --------------------------------------------------------------------------
def try_import(name):
    try:
        return importlib.import_module(name), None
    except Exception as e:  # noqa: BLE001 -- any import failure means "skip"
        return None, f"{type(e).__name__}: {e}"


def load_libraries(args, say):
    libs = {}
    if "jaxmb" in args.libs:
        # Benchmark the checkout this script lives in, installed or not.
        root = Path(__file__).resolve().parent.parent
        if (root / "jaxmb" / "__init__.py").exists() and str(root) not in sys.path:
            sys.path.insert(0, str(root))
        mb, err = try_import("jaxmb")
        missing = []
        if mb is not None:
            for attr in ("mass_matrix", "bias_forces", "forward_dynamics"):
                if not hasattr(mb, attr):
                    missing.append(f"jaxmb.{attr}")
            models = getattr(mb, "models", None)
            if models is None or not hasattr(models, "planar_chain"):
                missing.append("jaxmb.models.planar_chain")
        if mb is None or missing:
            say(f"skipping jaxmb: {err or 'missing ' + ', '.join(missing)}")
        else:
            libs["jaxmb"] = mb
    if "pinocchio" in args.libs:
        pin, err = try_import("pinocchio")
        if pin is None:
            say(f"skipping pinocchio (pip install pin): {err}")
        else:
            libs["pinocchio"] = pin
    if "mujoco" in args.libs or "mjx" in args.libs:
        mujoco, err = try_import("mujoco")
        if mujoco is None:
            say(f"skipping mujoco and mjx (pip install mujoco mujoco-mjx): {err}")
        else:
            if "mujoco" in args.libs:
                libs["mujoco"] = mujoco
            if "mjx" in args.libs:
                import contextlib
                import io

                # mujoco.mjx prints "Failed to import warp" on machines without
                # NVIDIA warp; that is expected on CPU.
                with contextlib.redirect_stdout(io.StringIO()), \
                        contextlib.redirect_stderr(io.StringIO()):
                    mjx, err = try_import("mujoco.mjx")
                if mjx is None:
                    say(f"skipping mjx (pip install mujoco-mjx): {err}")
                else:
                    libs["mjx"] = (mujoco, mjx)
    return libs


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------
def main(argv=None):
    args = parse_args(argv)

    # XLA flags must be in the environment before jax is imported.
    if args.no_fusion_emitters:
        fusion_emitters_off(force=True)  # where the installed jaxlib knows the flag
    if "jax" in sys.modules:
        print("warning: jax was imported before bench_core.main; XLA_FLAGS may "
              "not take effect", file=sys.stderr)

    import jax

    # Compile times are reported: no persistent compilation cache (JAX_COMPILATION_CACHE_DIR).
    jax.config.update("jax_compilation_cache_dir", None)
    if args.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np
    from tqdm import tqdm

    show_progress = not args.no_progress

    def say(msg):
        if show_progress:
            tqdm.write(msg)
        else:
            print(msg, flush=True)

    libs = load_libraries(args, say)
    jdtype = jnp.float64 if args.dtype == "float64" else jnp.float32

    versions = {"jax": jax.__version__, "numpy": np.__version__, "python": platform.python_version()}
    try:
        import jaxlib

        versions["jaxlib"] = jaxlib.__version__
    except Exception:  # noqa: BLE001
        pass
    if "jaxmb" in libs:
        versions["jaxmb"] = getattr(libs["jaxmb"], "__version__", "unknown")
    if "pinocchio" in libs:
        versions["pinocchio"] = libs["pinocchio"].__version__
    if "mujoco" in libs or "mjx" in libs:
        mujoco_mod = libs.get("mujoco") or libs["mjx"][0]
        versions["mujoco"] = mujoco_mod.__version__
    if "mjx" in libs:
        try:
            from importlib.metadata import version as _dist_version

            versions["mujoco-mjx"] = _dist_version("mujoco-mjx")
        except Exception:  # noqa: BLE001
            pass

    cpu_model = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass

    meta = {
        "benchmark": "core",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "devices": [str(d) for d in jax.devices()],
        "backend": jax.default_backend(),
        "cpu": cpu_model,
        "cpu_count": os.cpu_count(),
        "load_average_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "platform": platform.platform(),
        "versions": versions,
        "dtype": args.dtype,
        "jax_dtype_note": "Pinocchio and MuJoCo (C) always compute in float64",
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "fusion_emitters_disabled": FUSION_FLAG in os.environ.get("XLA_FLAGS", ""),
        "model_passed_as": "constant" if args.model_const else "argument",
        "ns": list(args.n),
        "batch_sizes": list(args.batch_sizes),
        "repeats": args.repeats,
        "min_time_per_repeat_s": args.min_time,
        "quick": args.quick,
        "skipped": [lib for lib in args.libs if lib not in libs],
        "model": {
            "name": "planar_chain",
            "length_m": LENGTH,
            "mass_kg": MASS,
            "gravity": [0.0, -GRAVITY, 0.0],
            "mujoco_rod_axis_inertia": MJ_IYY,
        },
    }
    say(f"devices: {meta['devices']}  jax {jax.__version__}  dtype {args.dtype}  "
        f"XLA_FLAGS={meta['xla_flags']!r}")

    rng = np.random.default_rng(args.seed)
    max_batch = max(args.batch_sizes) if args.batch_sizes else 1

    # ---------------- per-n setup: models and random states ----------------
    setups = {}
    for n in args.n:
        s = {
            "q": rng.uniform(-np.pi, np.pi, n),
            "qd": rng.uniform(-2.0, 2.0, n),
            "tau": rng.uniform(-5.0, 5.0, n),
            "Q": rng.uniform(-np.pi, np.pi, (max_batch, n)),
            "QD": rng.uniform(-2.0, 2.0, (max_batch, n)),
            "TAU": rng.uniform(-5.0, 5.0, (max_batch, n)),
        }
        if "jaxmb" in libs:
            s["jaxmb_model"] = libs["jaxmb"].models.planar_chain(n, length=LENGTH, mass=MASS)
        if "pinocchio" in libs:
            pin = libs["pinocchio"]
            s["pin_model"] = pinocchio_chain(pin, np, n)
            s["pin_data"] = s["pin_model"].createData()
        if "mujoco" in libs or "mjx" in libs:
            mujoco_mod = libs.get("mujoco") or libs["mjx"][0]
            s["mj_model"] = mujoco_mod.MjModel.from_xml_string(mujoco_xml(n))
        if "mjx" in libs:
            _, mjx = libs["mjx"]
            s["mjx_model"] = mjx.put_model(s["mj_model"])
            s["mjx_data0"] = mjx.make_data(s["mj_model"])
        setups[n] = s

    # ---------------- jitted function builders (jaxmb, mjx) ----------------
    def jaxmb_fn(model, quantity):
        import equinox as eqx

        mb = libs["jaxmb"]
        f = {"mass_matrix": lambda m, q, qd, tau: mb.mass_matrix(m, q),
             "bias_forces": lambda m, q, qd, tau: mb.bias_forces(m, q, qd),
             "forward_dynamics": lambda m, q, qd, tau: mb.forward_dynamics(m, q, qd, tau),
             DISPATCH: lambda m, q, qd, tau: q + qd}[quantity]
        params, static = eqx.partition(model, eqx.is_array)
        params = jax.tree_util.tree_map(
            lambda x: jnp.asarray(x, jdtype) if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating) else x,
            params)

        def g(p, q, qd, tau):
            return f(eqx.combine(p, static), q, qd, tau)

        return g, params

    def mjx_fn(s, quantity):
        _, mjx = libs["mjx"]
        d0 = s["mjx_data0"]
        mx = s["mjx_model"]
        if args.dtype == "float32":
            mx = jax.tree_util.tree_map(
                lambda x: x.astype(jnp.float32) if hasattr(x, "dtype") and x.dtype == np.float64 else x, mx)

        if quantity == DISPATCH:
            return (lambda m, q, qd, tau: q + qd), mx

        def g(m, q, qd, tau):
            d = d0.replace(qpos=q, qvel=qd, qfrc_applied=tau)
            d = mjx.forward(m, d)
            return d.qacc

        return g, mx

    compiled_cache = {}

    def build(lib, quantity, n, batch):
        """jit + lower + compile (timed) one configuration; memoised so that the
        agreement check and the timing share the single-call executables."""
        key = (lib, quantity, n, batch)
        if key in compiled_cache:
            return compiled_cache[key]
        s = setups[n]
        fn, model_arg = jaxmb_fn(s["jaxmb_model"], quantity) if lib == "jaxmb" else mjx_fn(s, quantity)
        if batch is None:
            data = tuple(jnp.asarray(s[k], jdtype) for k in ("q", "qd", "tau"))
        else:
            data = tuple(jnp.asarray(s[k][:batch], jdtype) for k in ("Q", "QD", "TAU"))
        data = jax.device_put(data)
        if args.model_const:
            def f(q, qd, tau):
                return fn(model_arg, q, qd, tau)
            if batch is not None:
                f = jax.vmap(f)
            call_args = data
        else:
            f = fn if batch is None else jax.vmap(fn, in_axes=(None, 0, 0, 0))
            call_args = (model_arg, *data)
        t0 = time.perf_counter()
        lowered = jax.jit(f).lower(*call_args)
        t1 = time.perf_counter()
        compiled = lowered.compile()
        t2 = time.perf_counter()
        compiled_cache[key] = (compiled, call_args, t1 - t0, t2 - t1)
        return compiled_cache[key]

    def compile_and_time(lib, quantity, n, batch):
        """Lower+compile (timed), then time execution of the compiled call."""
        compiled, call_args, lower_s, compile_s = build(lib, quantity, n, batch)
        compiled_cache.pop((lib, quantity, n, batch), None)
        jax.block_until_ready(compiled(*call_args))
        block = jax.block_until_ready

        def call():
            block(compiled(*call_args))

        number, per_call = _time_loop(call, args.repeats, args.min_time, max_number=100_000)
        res = {"lower_s": lower_s, "compile_s": compile_s, "number": number, "per_call_s": per_call}
        res.update(_summary(per_call, batch))
        return res

    # ---------------- C-library timing callables ----------------
    def pin_call(s, quantity):
        pin = libs["pinocchio"]
        model, data = s["pin_model"], s["pin_data"]
        q, qd, tau = (np.ascontiguousarray(s[k]) for k in ("q", "qd", "tau"))
        if quantity == "mass_matrix":
            crba = pin.crba
            return lambda: crba(model, data, q), "pin.crba (upper triangle; symmetrised only for the comparison)"
        if quantity == "bias_forces":
            nle = pin.nonLinearEffects
            return lambda: nle(model, data, q, qd), "pin.nonLinearEffects"
        aba = pin.aba
        return lambda: aba(model, data, q, qd, tau), "pin.aba"

    def mujoco_call(s, quantity):
        mujoco = libs["mujoco"]
        m = s["mj_model"]
        d = mujoco.MjData(m)
        d.qpos[:] = s["q"]
        d.qvel[:] = s["qd"]
        d.qfrc_applied[:] = s["tau"]
        if quantity == "mass_matrix":
            kin, com, mk = mujoco.mj_kinematics, mujoco.mj_comPos, mujoco.mj_makeM

            def call():
                kin(m, d)
                com(m, d)
                mk(m, d)
            return (call, "mj_kinematics + mj_comPos + mj_makeM (sparse M, no dense copy)",
                    lambda: mujoco_full_m(mujoco, np, m, d))
        if quantity == "bias_forces":
            kin, com, vel, rne = mujoco.mj_kinematics, mujoco.mj_comPos, mujoco.mj_comVel, mujoco.mj_rne
            res = np.zeros(m.nv)

            def call():
                kin(m, d)
                com(m, d)
                vel(m, d)
                rne(m, d, 0, res)
            return (call, "mj_kinematics + mj_comPos + mj_comVel + mj_rne(flg_acc=0)",
                    lambda: res.copy())
        fwd = mujoco.mj_forward
        return ((lambda: fwd(m, d)), "mj_forward (full pipeline: M, factorisation, bias, qacc)",
                lambda: d.qacc.copy())

    # ---------------- agreement check ----------------
    agreement = []
    tol = 1e-9 if args.dtype == "float64" else 1e-3

    def _cmp(name, quantity, n, a, ref):
        a = np.asarray(a, dtype=np.float64)
        ref = np.asarray(ref, dtype=np.float64)
        absdiff = float(np.max(np.abs(a - ref)))
        scale = float(max(1.0, np.max(np.abs(ref))))
        row = {"n": n, "quantity": quantity, "library": name, "reference": "pinocchio",
               "max_abs_diff": absdiff, "max_rel_diff": absdiff / scale,
               "ref_max_abs": float(np.max(np.abs(ref))), "ok": absdiff / scale < tol}
        agreement.append(row)
        return row

    def check_agreement(n, s):
        """Compare every library against a reference for one random state."""
        q, qd, tau = s["q"], s["qd"], s["tau"]
        ref = {}
        if "pinocchio" in libs:
            pin = libs["pinocchio"]
            model, data = s["pin_model"], s["pin_data"]
            M = np.array(pin.crba(model, data, q))
            M = np.triu(M) + np.triu(M, 1).T
            ref["pinocchio"] = {"mass_matrix": M,
                                "bias_forces": np.array(pin.nonLinearEffects(model, data, q, qd)),
                                "forward_dynamics": np.array(pin.aba(model, data, q, qd, tau))}
        if "mujoco" in libs or "mjx" in libs:
            mujoco = libs.get("mujoco") or libs["mjx"][0]
            m = s["mj_model"]
            d = mujoco.MjData(m)
            d.qpos[:], d.qvel[:], d.qfrc_applied[:] = q, qd, tau
            mujoco.mj_forward(m, d)
            ref["mujoco"] = {"mass_matrix": mujoco_full_m(mujoco, np, m, d),
                             "bias_forces": d.qfrc_bias.copy(),
                             "forward_dynamics": d.qacc.copy()}
            # The timed callables themselves compute the same numbers.
            if "mujoco" in libs:
                timed = {}
                for quantity in QUANTITIES:
                    call, _, read = mujoco_call(s, quantity)
                    call()
                    timed[quantity] = read()
                ref["mujoco (timed calls)"] = timed
        if "mjx" in libs:
            _, mjx = libs["mjx"]
            d = s["mjx_data0"].replace(qpos=jnp.asarray(q, jdtype), qvel=jnp.asarray(qd, jdtype),
                                       qfrc_applied=jnp.asarray(tau, jdtype))
            mx = s["mjx_model"]
            d = jax.jit(mjx.forward)(mx, d)
            ref["mjx"] = {"mass_matrix": np.asarray(mjx.full_m(mx, d)),
                          "bias_forces": np.asarray(d.qfrc_bias),
                          "forward_dynamics": np.asarray(d.qacc)}
        if "jaxmb" in libs:
            vals = {}
            for quantity in QUANTITIES:
                if quantity in args.quantities:  # reused by the timing below
                    compiled, call_args, _, _ = build("jaxmb", quantity, n, None)
                    vals[quantity] = np.asarray(compiled(*call_args))
                else:
                    fn, params = jaxmb_fn(s["jaxmb_model"], quantity)
                    vals[quantity] = np.asarray(jax.jit(fn)(params, *(jnp.asarray(x, jdtype)
                                                                      for x in (q, qd, tau))))
            ref["jaxmb"] = vals
            s["jaxmb_values"] = vals
        base = "pinocchio" if "pinocchio" in ref else ("mujoco" if "mujoco" in ref else None)
        if base is None:
            say(f"n={n}: no reference library (pinocchio or mujoco), agreement not checked")
            return
        for name, vals in ref.items():
            if name == base:
                continue
            for quantity, v in vals.items():
                row = _cmp(name, quantity, n, v, ref[base][quantity])
                row["reference"] = base

    for n in tqdm(list(setups), desc="agreement check (compiles single calls)", unit="n",
                  disable=not show_progress, dynamic_ncols=True, file=sys.stderr):
        check_agreement(n, setups[n])
    if agreement:
        lines = [f"agreement with {agreement[0]['reference']} at one random state "
                 f"(rel = max|diff| / max(1, max|ref|), tolerance {tol:g}):",
                 f"  {'library':<30} {'quantity':<17} {'n':>3} {'max|diff|':>10} {'rel':>10}  ok"]
        for r in agreement:
            lines.append(f"  {r['library']:<30} {r['quantity']:<17} {r['n']:>3} "
                         f"{r['max_abs_diff']:>10.2e} {r['max_rel_diff']:>10.2e}  "
                         f"{'yes' if r['ok'] else 'NO'}")
        say("\n".join(lines))
        bad = [r for r in agreement if not r["ok"]]
        if bad:
            say(f"WARNING: {len(bad)} comparisons exceed tolerance {tol:g}")
            if "jaxmb_values" in next(iter(setups.values())):
                for r in bad:
                    if r["library"] == "jaxmb":
                        s = setups[r["n"]]
                        say(f"  jaxmb {r['quantity']} n={r['n']}: q={s['q'].tolist()} "
                            f"qd={s['qd'].tolist()} tau={s['tau'].tolist()}\n"
                            f"    jaxmb={s['jaxmb_values'][r['quantity']].tolist()}")

    if args.check_only:
        bad = [r for r in agreement if not r["ok"]]
        return 1 if bad else 0

    # ---------------- the configurations ----------------
    configs = []
    for n in args.n:
        if "jaxmb" in libs:
            configs.append(("jaxmb", DISPATCH, n, None))
            for quantity in args.quantities:
                for batch in (None, *args.batch_sizes):
                    configs.append(("jaxmb", quantity, n, batch))
        if "mjx" in libs:
            configs.append(("mjx", DISPATCH, n, None))
            for batch in (None, *args.batch_sizes):
                configs.append(("mjx", "forward_dynamics", n, batch))
        if "pinocchio" in libs:
            for quantity in args.quantities:
                configs.append(("pinocchio", quantity, n, None))
        if "mujoco" in libs:
            for quantity in args.quantities:
                configs.append(("mujoco", quantity, n, None))

    results = []
    bar = tqdm(configs, disable=not show_progress, unit="cfg", dynamic_ncols=True, file=sys.stderr)
    for lib, quantity, n, batch in bar:
        bar.set_description(f"{lib} {quantity} n={n} batch={batch or 'single'}")
        s = setups[n]
        row = {"library": lib, "quantity": quantity, "n": n, "batch": batch,
               "dtype": args.dtype if lib in ("jaxmb", "mjx") else "float64",
               "vmap": batch is not None}
        try:
            if lib in ("jaxmb", "mjx"):
                res = compile_and_time(lib, quantity, n, batch)
                if quantity == DISPATCH:
                    row["calls"] = DISPATCH_DESC
                else:
                    what = f"jaxmb.{quantity}" if lib == "jaxmb" else "mjx.forward"
                    row["calls"] = (f"jax.jit({'jax.vmap(' if batch else ''}{what}{')' if batch else ''})"
                                    + (" returning qacc" if lib == "mjx" else ""))
            else:
                call, desc = (pin_call if lib == "pinocchio" else mujoco_call)(s, quantity)[:2]
                number, per_call = _time_loop(call, args.repeats, args.min_time)
                res = {"lower_s": None, "compile_s": None, "number": number, "per_call_s": per_call}
                res.update(_summary(per_call, None))
                row["calls"] = desc
            row.update(res)
        except Exception as e:  # noqa: BLE001 -- record and go on
            row["error"] = f"{type(e).__name__}: {e}"
            say(f"error in {lib} {quantity} n={n} batch={batch}: {row['error']}")
        results.append(row)
    bar.close()

    # ---------------- table ----------------
    header = (f"{'library':<10} {'quantity':<17} {'n':>3} {'batch':>6} {'compile s':>9} "
              f"{'us/call':>10} {'us/state':>9} {'(median us/state)':>17}")
    lines = [header, "-" * len(header)]
    for r in results:
        b = "single" if r["batch"] is None else str(r["batch"])
        if "error" in r:
            lines.append(f"{r['library']:<10} {r['quantity']:<17} {r['n']:>3} {b:>6}  ERROR {r['error']}")
            continue
        comp = "-" if r["compile_s"] is None else f"{r['lower_s'] + r['compile_s']:.3f}"
        lines.append(f"{r['library']:<10} {r['quantity']:<17} {r['n']:>3} {b:>6} {comp:>9} "
                     f"{r['us_per_call_best']:>10.2f} {r['us_per_state_best']:>9.3f} "
                     f"{r['us_per_state_median']:>17.3f}")
    table = "\n".join(lines)
    print()
    print(f"# jaxmb core benchmark: planar_chain(n), {args.dtype}, devices {meta['devices']}, "
          f"jax {jax.__version__}, XLA_FLAGS={meta['xla_flags']!r}, model as {meta['model_passed_as']}, "
          f"{meta['cpu_count']} CPUs, load average at start {meta['load_average_at_start']}")
    print("# compile s = trace/lower + XLA compile; us/call = best of repeats (blocking after "
          "each call); us/state = us/call / batch")
    print(table)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as f:
        json.dump({"meta": meta, "agreement": agreement, "results": results, "table": table},
                  f, indent=1)
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
