"""Rigid-body dynamics against Pinocchio, MuJoCo and MJX: mass matrix, bias forces and
forward dynamics of `planar_chain(n)`, µs per state, single calls and batches.

The chain: n uniform rods of 1 m and 1 kg (inertia m l²/12 about the two axes across
the rod), revolute joints about z, gravity (0, -9.81, 0); built as
`jaxmb.models.planar_chain(n)`, as a Pinocchio model (`JointModelRZ`) and as MJCF
(hinges about z; MuJoCo rejects a zero principal inertia, so the rod's own axis gets
1e-12, which never enters M, bias or qdd here). Before timing, every library's M,
bias and qdd at one random state are compared with jaxmb's (tolerance 1e-9 relative).

jaxmb and MJX: ``jax.jit`` of the call with the model closed over (compiled in, as a user's
``jax.jit(lambda q: mb.mass_matrix(model, q))``), single and under ``jax.vmap`` for each batch
size, compiled apart. (With the model as an argument a call also passes every array of the
model, thousands for an OpenSim model: milliseconds per call; docs/dev/performance.md.) Pinocchio (`crba`,
`nonLinearEffects`, `aba`) and MuJoCo (`mj_forward` and its sub-pipelines) are timed
one call at a time from Python. Libraries not installed are skipped with a note
(``pip install pin mujoco mujoco-mjx``).

OpenSim models (``--osim``; the full run takes jaxmb's bundled gait2354): mass matrix,
inverse dynamics and forward dynamics at the model's default pose, compile time and µs
per state, single calls and the largest batch, against OpenSim 4.6 itself on the same
states (``SimbodyMatterSubsystem.calcM``, ``InverseDynamicsSolver``, ``realizeAcceleration``;
`benchmarks/_opensim_dynamics.py`, run in a Python of its own: ``--opensim-python`` or
``$JAXMB_OPENSIM_PYTHON``). Where every OpenSim coordinate is one of jaxmb's (no coupler
constraint embedded), the first state's mass matrix and inverse dynamics are compared too.
RajagopalLaiUhlrich2023 is in the opensim-models repository
(Models/Rajagopal/RajagopalLaiUhlrich2023.osim).

    python benchmarks/bench_dynamics.py [--quick] [--n 2,7,20] [--batch-sizes 1,512,8192]
                                        [--osim PATH[,PATH]] [--opensim-python PY]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import _harness as H  # noqa: E402  (sets XLA flags and x64 before jax)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmb as mb  # noqa: E402

QUANTITIES = ("mass_matrix", "bias_forces", "forward_dynamics")
L, MASS, G = 1.0, 1.0, 9.81


def pinocchio_chain(pin, n):
    model = pin.Model()
    model.gravity = pin.Motion(np.array([0.0, -G, 0.0]), np.zeros(3))
    parent, i_rod = 0, MASS * L**2 / 12.0
    for i in range(n):
        placement = pin.SE3(np.eye(3), np.array([0.0, 0.0 if i == 0 else -L, 0.0]))
        jid = model.addJoint(parent, pin.JointModelRZ(), placement, f"joint{i + 1}")
        model.appendBodyToJoint(jid, pin.Inertia(MASS, np.array([0.0, -L / 2, 0.0]), np.diag([i_rod, 0.0, i_rod])),
                                pin.SE3.Identity())
        parent = jid
    return model


def mujoco_xml(n):
    i_rod, body = MASS * L**2 / 12.0, ""
    for i in reversed(range(n)):
        pos = "0 0 0" if i == 0 else f"0 {-L!r} 0"
        body = (f'<body name="rod{i + 1}" pos="{pos}"><joint name="joint{i + 1}" type="hinge" axis="0 0 1" '
                f'damping="0" armature="0" frictionloss="0" stiffness="0" limited="false"/>'
                f'<inertial pos="0 {-L / 2!r} 0" mass="{MASS!r}" diaginertia="{i_rod!r} 1e-12 {i_rod!r}"/>'
                f"{body}</body>")
    return (f'<mujoco><compiler angle="radian" inertiafromgeom="false"/><option gravity="0 {-G!r} 0">'
            f'<flag contact="disable" constraint="disable"/></option><worldbody>{body}</worldbody></mujoco>')


def _jaxmb_fns(model):
    return {"mass_matrix": lambda m, q, qd, tau: mb.mass_matrix(m, q),
            "bias_forces": lambda m, q, qd, tau: mb.bias_forces(m, q, qd),
            "forward_dynamics": lambda m, q, qd, tau: mb.forward_dynamics(m, q, qd, tau)}


BUNDLED_OSIM = H.ROOT / "jaxmb" / "data" / "gait2354_simbody.osim"


OPENSIM_STATES = 50  # states OpenSim is timed on (one call each)


def opensim_dynamics(python, path, model, Q, QD, QDD):
    """OpenSim's CPU seconds per state for each quantity on jaxmb's first states, and its
    first state's (M, τ) in jaxmb's coordinate order, or None where OpenSim has mobilities
    that jaxmb embeds (coupler constraints)."""
    with tempfile.TemporaryDirectory() as tmp:
        states, out = Path(tmp) / "states.npz", Path(tmp) / "out.json"
        k = min(OPENSIM_STATES, Q.shape[0])
        np.savez(states, coordinate_names=np.array(model.coordinate_names), q=np.asarray(Q[:k]),
                 qd=np.asarray(QD[:k]), qdd=np.asarray(QDD[:k]))
        subprocess.run([python, str(H.ROOT / "benchmarks" / "_opensim_dynamics.py"), str(path), str(states), str(out)],
                       check=True, capture_output=True)
        d = json.loads(out.read_text())
    seconds = {q: d[q]["cpu_s_per_state"] for q in ("mass_matrix", "inverse_dynamics", "forward_dynamics")}
    first = d["first_state"] if d["nu"] == model.nq else None
    return seconds, first


def _jitted_calls(calls, key, fn, single, batches):
    """`fn` (of arrays only: the model closed over, compiled in) compiled at the `single`
    state's arguments and under `jax.vmap` at each of `batches` (``{batch: arguments}``):
    its timed calls ``calls[key + (batch,)]``, batch "single" for the first."""
    for batch, args in (("single", single), *batches.items()):
        c, lo, co = H.compile_apart(fn if batch == "single" else jax.vmap(fn), *args)
        calls[(*key, batch)] = (lambda c=c, a=args: c(*a), lo + co, 1 if batch == "single" else batch)


def osim_calls(path, batch_sizes, rng, opensim_python=""):
    """jaxmb's timed calls on one OpenSim model: ``{(library, quantity, name, batch): (call, compile s, states)}``,
    OpenSim's rows ``(library, quantity, name, batch, µs per state)`` and agreement checks."""
    calls, opensim_rows, agreement = {}, [], []
    model = mb.io.read_osim(path).model
    name = Path(path).stem
    big = max(batch_sizes)
    spread = rng.uniform(-0.05, 0.05, (big, model.nq))
    Q, QD, QDD = (jnp.asarray(np.asarray(model.q_default)[None] + spread), jnp.asarray(spread * 10),
                  jnp.asarray(spread * 100))
    fns = {"mass_matrix": lambda m, q, qd, qdd: mb.mass_matrix(m, q),
           "inverse_dynamics": lambda m, q, qd, qdd: mb.inverse_dynamics(m, q, qd, qdd),
           "forward_dynamics": lambda m, q, qd, qdd: mb.forward_dynamics(m, q, qd, qdd)}
    for quantity, f in fns.items():
        _jitted_calls(calls, ("jaxmb", quantity, name), lambda q, qd, qdd, f=f, model=model: f(model, q, qd, qdd),
                      (Q[0], QD[0], QDD[0]), {big: (Q, QD, QDD)})
    if opensim_python:
        seconds, first = opensim_dynamics(opensim_python, path, model, Q, QD, QDD)
        opensim_rows += [("opensim", quantity, name, "single", H.us(s)) for quantity, s in seconds.items()]
        if first is not None:
            agreement += [("opensim", "mass_matrix", name, np.asarray(first["mass_matrix"]),
                           np.asarray(mb.mass_matrix(model, Q[0]))),
                          ("opensim", "inverse_dynamics", name, np.asarray(first["inverse_dynamics"]),
                           np.asarray(mb.inverse_dynamics(model, Q[0], QD[0], QDD[0])))]
    return calls, opensim_rows, agreement


def _check(agreement):
    """Raise where a library's quantity differs from jaxmb's by more than 1e-9 (relative)."""
    for lib, quantity, n, got, want in agreement:
        rel = float(np.max(np.abs(got - want)) / max(1.0, np.max(np.abs(want))))
        if rel > 1e-9:
            raise AssertionError(f"{lib} {quantity} n={n} differs from jaxmb by {rel:.1e} (relative)")


def _time_new(calls, timed, rounds, min_time):
    """Time the calls of `calls` not yet in `timed`, interleaved among themselves: each
    model's calls are timed as soon as they are compiled, so that a run stopped at a time
    limit has logged what it timed (an accelerator's compiles take minutes)."""
    new = {k: v[0] for k, v in calls.items() if k not in timed}
    if new:
        timed.update(H.time_calls(new, rounds=rounds, min_time=min_time))


def run(quick=False, ns=None, batch_sizes=None, libs=("jaxmb", "mjx", "pinocchio", "mujoco"), rounds=None,
        min_time=None, out_dir=H.RESULTS, osim=None, opensim_python=None):
    ns = ns or ((7,) if quick else (2, 7, 20))
    osim = osim if osim is not None else (() if quick else (BUNDLED_OSIM,))
    batch_sizes = batch_sizes or ((1, 8192) if quick else (1, 64, 512, 8192))
    rounds = rounds or (3 if quick else 7)
    min_time = min_time or (0.02 if quick else 0.1)
    notes, found = [], {}
    if "pinocchio" in libs:
        found["pinocchio"], note = H.optional("pinocchio")
        notes += [f"Pinocchio skipped: {note}"] if note else []
    if "mujoco" in libs or "mjx" in libs:
        found["mujoco"], note = H.optional("mujoco")
        notes += [f"MuJoCo skipped: {note}"] if note else []
    if "mjx" in libs and found.get("mujoco") is not None:
        found["mjx"], note = H.optional("mujoco.mjx")
        notes += [f"MJX skipped: {note}"] if note else []
    rng = np.random.default_rng(0)
    rows, calls, agreement, timed = [], {}, [], {}
    for n in ns:
        model = mb.models.planar_chain(n, length=L, mass=MASS)
        q, qd, tau = (jnp.asarray(rng.uniform(-a, a, n)) for a in (np.pi, 2.0, 5.0))
        big = max(batch_sizes)
        Q, QD, TAU = (jnp.asarray(rng.uniform(-a, a, (big, n))) for a in (np.pi, 2.0, 5.0))
        batched = {b: (Q[:b], QD[:b], TAU[:b]) for b in batch_sizes}
        ref = {k: np.asarray(f(model, q, qd, tau)) for k, f in _jaxmb_fns(model).items()}
        if "jaxmb" in libs:
            for quantity, f in _jaxmb_fns(model).items():
                _jitted_calls(calls, ("jaxmb", quantity, n), lambda q, qd, tau, f=f, model=model: f(model, q, qd, tau),
                              (q, qd, tau), batched)
        mujoco, mjx, pin = found.get("mujoco"), found.get("mjx"), found.get("pinocchio")
        if mujoco is not None:
            m = mujoco.MjModel.from_xml_string(mujoco_xml(n))
            d = mujoco.MjData(m)
            d.qpos[:], d.qvel[:], d.qfrc_applied[:] = np.asarray(q), np.asarray(qd), np.asarray(tau)
            mujoco.mj_forward(m, d)
            full = np.zeros((n, n))
            try:  # MuJoCo >= 4: mj_fullM(m, d, dst); MuJoCo 3: mj_fullM(m, dst, qM)
                mujoco.mj_fullM(m, d, full)
            except TypeError:
                mujoco.mj_fullM(m, full, d.qM)
            got = {"mass_matrix": full, "bias_forces": d.qfrc_bias.copy(), "forward_dynamics": d.qacc.copy()}
            agreement += [("mujoco", k, n, got[k], ref[k]) for k in QUANTITIES]
            if "mujoco" in libs:
                def mj_m(m=m, d=d):
                    mujoco.mj_kinematics(m, d), mujoco.mj_comPos(m, d), mujoco.mj_makeM(m, d)

                def mj_b(m=m, d=d):
                    mujoco.mj_kinematics(m, d), mujoco.mj_comPos(m, d), mujoco.mj_comVel(m, d)
                    mujoco.mj_rne(m, d, 0, d.qfrc_bias)
                for quantity, f in zip(QUANTITIES, (mj_m, mj_b, lambda m=m, d=d: mujoco.mj_forward(m, d))):
                    calls[("mujoco", quantity, n, "single")] = (f, None, 1)
            if mjx is not None:
                mx = mjx.put_model(m)
                dx = mjx.make_data(mx)

                def mjx_fd(q, qd, tau, mx=mx, dx=dx):  # the model compiled in, as jaxmb's
                    # MJX's own code broadcasts ranks and promotes dtypes implicitly, which
                    # the test suite's strict settings (tests/conftest.py) would refuse.
                    with jax.numpy_rank_promotion("allow"), jax.numpy_dtype_promotion("standard"):
                        return mjx.forward(mx, dx.replace(qpos=q, qvel=qd, qfrc_applied=tau)).qacc
                agreement.append(("mjx", "forward_dynamics", n, np.asarray(jax.jit(mjx_fd)(q, qd, tau)),
                                  ref["forward_dynamics"]))
                _jitted_calls(calls, ("mjx", "forward_dynamics", n), mjx_fd, (q, qd, tau), batched)
        if pin is not None:
            pm = pinocchio_chain(pin, n)
            pd = pm.createData()
            qn, qdn, taun = (np.asarray(x) for x in (q, qd, tau))
            crba = pin.crba(pm, pd, qn)
            got = {"mass_matrix": np.triu(crba) + np.triu(crba, 1).T,
                   "bias_forces": pin.nonLinearEffects(pm, pd, qn, qdn).copy(),
                   "forward_dynamics": pin.aba(pm, pd, qn, qdn, taun).copy()}
            agreement += [("pinocchio", k, n, got[k], ref[k]) for k in QUANTITIES]
            fs = (lambda a=(pm, pd, qn): pin.crba(*a), lambda a=(pm, pd, qn, qdn): pin.nonLinearEffects(*a),
                  lambda a=(pm, pd, qn, qdn, taun): pin.aba(*a))
            for quantity, f in zip(QUANTITIES, fs):
                calls[("pinocchio", quantity, n, "single")] = (f, None, 1)
        _check(agreement)
        _time_new(calls, timed, rounds, min_time)
    opensim_python = opensim_python if opensim_python is not None else os.environ.get("JAXMB_OPENSIM_PYTHON", "")
    opensim_rows = []
    for path in osim if "jaxmb" in libs else ():
        more, osim_rows, checks = osim_calls(path, batch_sizes, rng, opensim_python)
        calls.update(more)
        opensim_rows += osim_rows
        agreement += checks
        _check(checks)
        _time_new(calls, timed, rounds, min_time)
    if "jaxmb" in libs and osim and not opensim_python:
        notes.append("OpenSim not timed on the OpenSim models: give --opensim-python (or $JAXMB_OPENSIM_PYTHON)")
    for key, (_, compile_s, states) in calls.items():
        lib, quantity, n, batch = key
        t = timed[key]
        rows.append(dict(library=lib, quantity=quantity, n=n, batch=batch, compile_s=compile_s,
                         us_per_call=H.us(t["best_s"]), us_per_state=H.us(t["best_s"]) / states,
                         us_per_state_median=H.us(t["median_s"]) / states))
    for lib, quantity, n, batch, us in opensim_rows:  # CPU time per state over its states, one call each
        rows.append(dict(library=lib, quantity=quantity, n=n, batch=batch, compile_s=None, us_per_call=us,
                         us_per_state=us, us_per_state_median=None))
    notes.append(f"agreement with jaxmb within 1e-9 (relative): {sorted({a[0] for a in agreement}) or 'no competitor'}")
    result = {"meta": H.meta("dynamics", batch_sizes=batch_sizes, quick=quick, ns=list(ns), rounds=rounds,
                             model="planar_chain", osim=[str(p) for p in osim], model_passed_as="argument"),
              "rows": rows, "notes": notes, "headline": headline(rows)}
    table = H.markdown_table(rows, [("library", "library"), ("quantity", "quantity"), ("n", "n (chain) or model"),
                                    ("batch", "batch"),
                                    ("compile_s", "compile s"), ("us_per_call", "µs/call"),
                                    ("us_per_state", "µs/state")])
    return H.write(result, out_dir, table)


def headline(rows):
    """One headline row: forward dynamics of the largest chain timed near n = 7, µs per
    state, jaxmb's best batch against each competitor's."""
    fd = [r for r in rows if r["quantity"] == "forward_dynamics" and isinstance(r["n"], int)]  # the chains
    if not fd:
        return []
    n = min({r["n"] for r in fd}, key=lambda k: abs(k - 7))
    best = {}
    for r in fd:
        if r["n"] == n and (r["library"] not in best or r["us_per_state"] < best[r["library"]]["us_per_state"]):
            best[r["library"]] = r
    if "jaxmb" not in best:
        return []
    def at(r):
        return f"{r['us_per_state']:.3g} (batch {r['batch']})"
    others = "; ".join(f"{lib} {at(r)}" for lib, r in best.items() if lib != "jaxmb") or "no competitor installed"
    head = [{"what": f"planar_chain({n}) forward dynamics, µs per state", "jaxmb": at(best["jaxmb"]),
             "alternative": others, "script": "bench_dynamics.py"}]
    return head + _osim_headline(rows)


def _osim_headline(rows):
    """One row per OpenSim model: mass matrix / inverse dynamics / forward dynamics, µs per
    state, jaxmb single and in its largest batch against OpenSim's single calls."""
    out = []
    for name in dict.fromkeys(r["n"] for r in rows if not isinstance(r["n"], int)):
        def cost(lib, batch):
            got = {r["quantity"]: r["us_per_state"] for r in rows
                   if r["n"] == name and r["library"] == lib and (batch is None or r["batch"] == batch)}
            return " / ".join(f"{got[q]:.3g}" for q in ("mass_matrix", "inverse_dynamics", "forward_dynamics")
                              if q in got)
        batches = [r["batch"] for r in rows if r["n"] == name and r["library"] == "jaxmb" and r["batch"] != "single"]
        compile_s = [r["compile_s"] for r in rows if r["n"] == name and r["library"] == "jaxmb" and r["batch"] == "single"]
        jx = f"{cost('jaxmb', 'single')} single (compile {max(compile_s):.0f} s at most)"
        if batches:
            jx += f"; {cost('jaxmb', max(batches))} (batch {max(batches)})"
        osim = cost("opensim", None)
        out.append({"what": f"{name}: mass matrix / inverse dynamics / forward dynamics, µs per state", "jaxmb": jx,
                    "alternative": f"OpenSim 4.6 {osim} (single calls, CPU)" if osim else "OpenSim not timed",
                    "script": "bench_dynamics.py"})
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="n = 7, batches 1 and 8192, 3 rounds")
    p.add_argument("--n", help="comma-separated chain lengths")
    p.add_argument("--batch-sizes", help="comma-separated vmap batch sizes")
    p.add_argument("--libs", default="jaxmb,mjx,pinocchio,mujoco")
    p.add_argument("--osim", help="comma-separated OpenSim model files (default: the bundled gait2354; none with --quick)")
    p.add_argument("--opensim-python", help="a Python with `opensim` (default: $JAXMB_OPENSIM_PYTHON)")
    p.add_argument("--out-dir", default=str(H.RESULTS))
    a = p.parse_args(argv)
    ints = lambda s: tuple(int(x) for x in s.split(",")) if s else None  # noqa: E731
    run(quick=a.quick, ns=ints(a.n), batch_sizes=ints(a.batch_sizes), libs=tuple(a.libs.split(",")),
        out_dir=a.out_dir, osim=tuple(a.osim.split(",")) if a.osim else None, opensim_python=a.opensim_python)


if __name__ == "__main__":
    main()
