"""The shared harness of jaxmb's benchmarks: one way to compile, time and record.

Every benchmark script imports this module before anything imports jax, so that the
environment is set once: XLA's CPU fusion emitters off where the installed jaxlib has
that flag (`_xla_flags.py`), float64 on, JAX's persistent compilation cache off (a
compile time must be a compilation, not a load from a cache).

- `compile_apart(fn, *args)` compiles with ``jax.jit(fn).lower(*args).compile()`` and
  returns the compiled call with its lower and compile seconds.
- `time_calls({name: call})` times several calls in interleaved rounds (every call
  once per round, so that a slow spell of a shared machine slows all of them alike),
  each call blocked on with ``jax.block_until_ready``, and keeps the best round. On a
  CPU backend it charges CPU time of the process (insensitive to other jobs on the
  machine); on an accelerator, wall-clock time. The wall-clock time of the same rounds
  is kept beside it (``best_wall_s``): XLA's CPU runtime runs part of a program on a
  second thread, whose time the CPU clock adds to the caller's, so on a machine of
  several cores a program of many small kernels takes less wall time than CPU time,
  and a single-threaded competitor (OpenSim) is compared on both.
- Both report as they go, one line each on standard error (`progress`): every program
  compiled, with its argument shapes and seconds, and every call timed, so that a long
  run shows where it is and a run stopped at a time limit leaves its log.
- `meta(...)` records device, dtype, batch sizes, versions (jax, jaxlib, jaxmb and the
  competitors found) and the XLA flags; `write(...)` writes a result as JSON and as a
  markdown table under ``benchmarks/results/`` (an output folder, not tracked by git).

Benchmarks use jaxmb's public API only (``jaxmb.*``, ``jaxmb.constraints.*``,
``jaxmb.models.*``).
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

if str(ROOT) not in sys.path:  # jaxmb from this checkout when run as a script
    sys.path.insert(0, str(ROOT))

# The flag's module, by path: importing it through jaxmb would import jax first.
_flags_spec = importlib.util.spec_from_file_location("_xla_flags", ROOT / "jaxmb" / "cli" / "_xla_flags.py")
_xla_flags = importlib.util.module_from_spec(_flags_spec)
_flags_spec.loader.exec_module(_xla_flags)
fusion_emitters_off = _xla_flags.fusion_emitters_off

if "jax" not in sys.modules:
    fusion_emitters_off()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_compilation_cache_dir", None)
# $JAXMB_CPU_DEVICES CPU devices (one per core) for the batches split over devices
# (`bench_batches.py`); the count is fixed when JAX starts, so it is set here or not at all.
if os.environ.get("JAXMB_CPU_DEVICES"):
    jax.config.update("jax_num_cpu_devices", int(os.environ["JAXMB_CPU_DEVICES"]))


def optional(name: str):
    """``(module, None)``, or ``(None, note)`` when `name` is not installed: optional
    competitors are skipped with a note, never an error."""
    try:
        return importlib.import_module(name), None
    except Exception as e:  # noqa: BLE001 -- any import failure means "skip"
        return None, f"{name} not installed ({type(e).__name__}: {e})"


def clock() -> str:
    """``"cpu"`` (process CPU time) on a CPU backend, else ``"wall"``."""
    return "cpu" if jax.default_backend() == "cpu" else "wall"


def progress(text: str) -> None:
    """One line of progress on standard error, with the time of day."""
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def _shapes(args) -> str:
    return ", ".join("x".join(map(str, x.shape)) or "scalar" for x in jax.tree.leaves(args) if hasattr(x, "shape"))


def compile_apart(fn, *args):
    """``(compiled, lower_s, compile_s)`` of ``jax.jit(fn)`` at `args` (arrays are
    arguments; close over anything that is to be compiled in)."""
    t = time.perf_counter()
    lowered = jax.jit(fn).lower(*args)
    lower_s = time.perf_counter() - t
    t = time.perf_counter()
    compiled = lowered.compile()
    compile_s = time.perf_counter() - t
    progress(f"compiled {getattr(fn, '__name__', 'a function')} at ({_shapes(args)}): "
             f"lower {lower_s:.2f} s, compile {compile_s:.2f} s")
    return compiled, lower_s, compile_s


def time_calls(calls: dict, rounds: int = 5, min_time: float = 0.05, how: str | None = None) -> dict:
    """Best seconds per call of each of `calls` (name -> zero-argument callable).

    Each call is warmed up once and given a loop count so that a loop lasts about
    `min_time`; then `rounds` rounds, each running every call's loop once (interleaved).
    Returns ``{name: {"best_s", "median_s", "best_wall_s", "number", "rounds", "clock"}}``
    (``best_wall_s``: the best round by wall-clock time)."""
    how = how or clock()
    timer = time.process_time if how == "cpu" else time.perf_counter
    number = {}
    for name, call in calls.items():
        jax.block_until_ready(call())
        t = time.perf_counter()
        jax.block_until_ready(call())
        number[name] = max(1, int(min_time / max(time.perf_counter() - t, 1e-7)))
    per_call = {name: [] for name in calls}
    wall = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            t, w = timer(), time.perf_counter()
            for _ in range(number[name]):
                jax.block_until_ready(call())
            per_call[name].append((timer() - t) / number[name])
            wall[name].append((time.perf_counter() - w) / number[name])
    out = {}
    for name, times in per_call.items():
        times = sorted(times)
        out[name] = {"best_s": times[0], "median_s": times[len(times) // 2], "best_wall_s": min(wall[name]),
                     "number": number[name], "rounds": rounds, "clock": how}
        progress(f"timed {name}: best {times[0] * 1e6:.4g} µs per call ({how} time)")
    return out


def _version(dist: str):
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def meta(benchmark: str, *, dtype: str = "float64", batch_sizes=(), quick: bool = False, **extra) -> dict:
    """What a result was measured with: device, dtype, batch sizes, versions, flags."""
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    versions = {d: _version(d) for d in ("jax", "jaxlib", "jaxmb", "diffrax", "equinox", "numpy", "scipy", "pin",
                                         "mujoco", "mujoco-mjx", "opensim")}
    return {
        "benchmark": benchmark,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "commit": commit,
        "device": str(jax.devices()[0]),
        "device_kind": jax.devices()[0].device_kind,
        "backend": jax.default_backend(),
        "cpu_count": os.cpu_count(),
        "load_average_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {k: v for k, v in versions.items() if v is not None},
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "dtype": dtype,
        "batch_sizes": list(batch_sizes),
        "clock": clock(),
        "quick": quick,
        **extra,
    }


def markdown_table(rows: list[dict], columns: list[tuple[str, str]]) -> str:
    """A markdown table of `rows` with `columns` as ``(key, header)``; floats to 4
    significant digits, missing cells empty."""
    def cell(v):
        if v is None:
            return ""
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    lines = ["| " + " | ".join(h for _, h in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(k)) for k, _ in columns) + " |" for r in rows]
    return "\n".join(lines)


def sections(names, known: tuple[str, ...]) -> tuple[str, ...]:
    """`names` (a comma-separated string or a sequence) checked against a script's `known`
    sections."""
    names = tuple(x for x in names.split(",") if x.strip()) if isinstance(names, str) else tuple(names)
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError(f"unknown sections {unknown}; choose from {','.join(known)}")
    return names


def add_section(result: dict, tables: list[str], key: str, section: dict, title: str) -> None:
    """Merge a section (``rows``, ``notes``, ``headline``, ``table``, ``meta``, ...) into a
    script's `result`: its data under `key`, its headline rows and notes (prefixed with
    `key`) with the script's, its table after `title` in `tables`."""
    result[key] = {k: v for k, v in section.items() if k not in ("table", "headline", "notes")}
    result["headline"] = result.get("headline", []) + section["headline"]
    label = key.replace("_", " ")
    result["notes"] = result.get("notes", []) + [f"{label}: {n}" for n in section["notes"]]
    if section["table"]:
        tables.append(f"{title}:\n\n{section['table']}")


def write(result: dict, out_dir: Path | str | None, table: str) -> dict:
    """Write ``<name>.json`` and ``<name>.md`` (the meta line, `table`, the notes) to
    `out_dir` (``benchmarks/results`` by default; None writes nothing); print the
    table. Returns `result` with ``"table"`` set."""
    result = dict(result, table=table)
    m = result["meta"]
    head = (f"{m['benchmark']}: {m['device_kind']} ({m['backend']}), {m['dtype']}, {m['clock']} time, jax "
            f"{m['versions'].get('jax')}, jaxlib {m['versions'].get('jaxlib')}, XLA_FLAGS={m['xla_flags']!r}, "
            f"commit {m['commit']}, {m['date']}")
    notes = "".join(f"\n- {n}" for n in result.get("notes", []))
    text = f"{head}\n\n{table}\n{notes}\n"
    print("\n" + text, flush=True)
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        name = m["benchmark"]
        (out_dir / f"{name}.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
        (out_dir / f"{name}.md").write_text(text)
    return result


def us(seconds: float) -> float:
    return seconds * 1e6


def ms(seconds: float) -> float:
    return seconds * 1e3
