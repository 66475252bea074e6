"""The benchmarks' harness and one tiny in-process configuration of each script.

Speed is not asserted (a benchmark's numbers are outputs: `python -m benchmarks`);
what is asserted is that each script runs on jaxmb's public API, checks what it
compares, and returns the rows, table and headline that `benchmarks/run.py` collects.
No subprocess, no file written, seconds per script.
"""

import os
import pathlib

import jax
import numpy as np
import pytest

import jaxmb as mb

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    """The `benchmarks` package, with JAX's settings restored after the module (the
    harness switches the persistent compilation cache off for compile timings)."""
    old = jax.config.jax_compilation_cache_dir
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(ROOT))
    import benchmarks._harness as harness

    yield harness
    jax.config.update("jax_compilation_cache_dir", old)
    mp.undo()


def _check(result, name):
    assert result["meta"]["benchmark"] == name and result["meta"]["dtype"] == "float64"
    assert result["meta"]["device"] and "jax" in result["meta"]["versions"]
    assert result["rows"] and result["table"].startswith("| ")
    for row in result["headline"]:
        assert set(row) == {"what", "jaxmb", "alternative", "script"}
    return result["rows"]


def test_harness_times_compile_and_run_apart(bench, capsys):
    import jax.numpy as jnp

    def doubled_sine(x):
        return jnp.sin(x) * 2.0

    comp, lower_s, compile_s = bench.compile_apart(doubled_sine, jnp.ones(3))
    assert lower_s > 0.0 and compile_s > 0.0
    np.testing.assert_allclose(comp(jnp.zeros(3)), 0.0)
    timed = bench.time_calls({"a": lambda: comp(jnp.ones(3)), "b": lambda: comp(jnp.zeros(3))}, rounds=2,
                             min_time=0.001)
    assert set(timed) == {"a", "b"}
    # Progress as it goes, on standard error: the program compiled, then each call timed.
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and "compiled doubled_sine at (3): lower" in err[0]
    assert "timed a: best" in err[1] and "timed b: best" in err[2]
    for t in timed.values():
        assert 0.0 < t["best_s"] <= t["median_s"] and t["rounds"] == 2 and t["clock"] == bench.clock()
        assert 0.0 < t["best_wall_s"]
    # On the wall clock both figures time the same loops by the same clock.
    walled = bench.time_calls({"a": lambda: comp(jnp.ones(3))}, rounds=3, min_time=0.001, how="wall")["a"]
    assert walled["clock"] == "wall" and walled["best_wall_s"] == pytest.approx(walled["best_s"], rel=0.05)
    meta = bench.meta("x", batch_sizes=(1, 8))
    assert meta["batch_sizes"] == [1, 8] and meta["backend"] == jax.default_backend()
    table = bench.markdown_table([{"a": 1.23456, "b": None}], [("a", "A"), ("b", "B")])
    assert table.splitlines()[-1] == "| 1.235 |  |"
    missing, note = bench.optional("no_such_module_jaxmb")
    assert missing is None and "not installed" in note


def test_fusion_emitter_flag_is_set_only_where_jaxlib_knows_it(monkeypatch, bench):
    # jaxlib 0.11 dropped the flag and XLA aborts on an unknown one: a benchmark started
    # with jax 0.11 (the GPU image's) must leave it out.
    from jaxmb.cli import _xla_flags

    flag = _xla_flags.FUSION_EMITTERS_OFF
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.setattr(_xla_flags, "version", lambda name: "0.11.2")
    _xla_flags.fusion_emitters_off(force=True)
    assert "XLA_FLAGS" not in os.environ
    monkeypatch.setattr(_xla_flags, "version", lambda name: "0.10.2")
    _xla_flags.fusion_emitters_off()
    assert os.environ["XLA_FLAGS"] == flag
    # A user's own flags win, unless the caller forces the flag in beside them.
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    _xla_flags.fusion_emitters_off()
    assert os.environ["XLA_FLAGS"] == "--xla_dump_to=/tmp/x"
    _xla_flags.fusion_emitters_off(force=True)
    _xla_flags.fusion_emitters_off(force=True)
    assert os.environ["XLA_FLAGS"] == f"--xla_dump_to=/tmp/x {flag}"


def test_digits_is_the_worst_angles_relative_error(bench):
    from benchmarks.bench_closed_chains import digits

    reference = np.arange(1.0, 8.0)
    angles = reference.copy()
    angles[2] *= 1.0 + 1e-5
    angles[6] *= 1.0 - 1e-7
    assert abs(digits(angles, reference) - 5.0) < 1e-9
    assert digits(reference, reference) == 17.0


def test_bench_dynamics_tiny(bench):
    from benchmarks import bench_dynamics

    rows = _check(bench_dynamics.run(ns=(2,), batch_sizes=(1, 2), libs=("jaxmb", "pinocchio", "mujoco", "mjx"),
                                     rounds=1, min_time=1e-4, out_dir=None,
                                     osim=(bench_dynamics.H.ROOT / "jaxmb" / "data" / "arm26.osim",)), "dynamics")
    assert {(r["library"], r["quantity"], r["batch"]) for r in rows if r["library"] == "jaxmb" and r["n"] == 2} == {
        ("jaxmb", q, b) for q in bench_dynamics.QUANTITIES for b in ("single", 1, 2)}
    assert {(r["quantity"], r["batch"]) for r in rows if r["n"] == "arm26"} == {
        (q, b) for q in ("mass_matrix", "inverse_dynamics", "forward_dynamics") for b in ("single", 2)}
    assert all(r["us_per_state"] > 0.0 for r in rows)


def test_bench_closed_chains_tiny(bench):
    from benchmarks import bench_closed_chains

    result = bench_closed_chains.run(tols=(1e-5,), solvers=("dopri8",), baumgarte=(100.0,), kinds=("quintic",),
                                     targets=(3,), rounds=1, scipy_tol=1e-4, trace_tol=False,
                                     sections=("andrews",), out_dir=None)
    rows = _check(result, "closed_chains")
    assert {r["kind"] for r in rows} == {"quintic", "DAE"}
    for r in rows:  # rtol = atol = 1e-5 gives 3-6 digits of the Test Set's solution
        assert 3.0 < r["digits"] < 7.0 and 20 < r["steps"] < 200, r
    (s,) = result["speedups"]
    assert s["kind"] == "quintic" and s["speedup"] > 0.0
    assert len(result["scipy"]) == 2 or any("scipy skipped" in n for n in result["notes"])


def test_bench_muscles_tiny(bench):
    from benchmarks import bench_muscles

    result = bench_muscles.run(quick=True, batch_sizes=(), muscles=("BRA",), rounds=1, n_states=2, out_dir=None,
                               geometries=("converged", "opensim", "fitted"), methods=("closed_form", "frozen_path"),
                               sections=("geometry",))
    row, frozen, iterates, _, fitted, _ = _check(result, "muscles")
    assert row["model"] == "arm26" and row["how"] == "jit" and row["ms_per_state"] > 0.0
    assert (row["wraps"], iterates["wraps"]) == ("converged", "opensim") and iterates["ms_per_state"] > 0.0
    assert (row["moment_arms"], frozen["moment_arms"]) == ("closed_form", "frozen_path") and frozen["ms_per_state"] > 0.0
    # The default geometry's and definition's row is unmarked; the others name themselves.
    what = [h["what"] for h in result["headline"]]
    assert len(what) == 6 and "wrap geometry" not in what[0] and "frozen-path" not in what[0]
    assert "frozen-path" in what[1] and "opensim wrap geometry" in what[2] and "fitted by polynomials" in what[4]
    assert fitted["wraps"] == "fitted" and fitted["ms_per_state"] > 0.0
    assert any("fitted paths: mb.fit_function_paths" in n for n in result["notes"])
    (summary,) = result["meta"]["models"]
    assert summary["n_muscles"] == 1 and summary["nq"] == 2
    if not os.environ.get("JAXMB_OPENSIM_PYTHON"):
        assert "stored in arm26.npz" in summary["opensim_source"]["geometric"]
        assert set(summary["opensim_seconds_per_state"]["geometric"]) == {"compute_moment_arm"}
        assert summary["opensim_seconds_per_state"]["fitted"] == {}
        assert row["compute_moment_arm_over_this"] > 0.0


def test_bench_muscles_keeps_static_optimization_in_a_section_of_its_own(bench, monkeypatch):
    """The static optimization section's rows stay under their key, its headline rows and
    notes join the script's (the section itself compiles for half a minute on arm26:
    `python benchmarks/bench_muscles.py --quick --sections static_optimization`)."""
    from benchmarks import _static_optimization, bench_muscles

    row = {"what": "so", "jaxmb": "1", "alternative": "2", "script": "bench_muscles.py"}
    monkeypatch.setattr(_static_optimization, "section", lambda **kw: {
        "meta": {"model": "arm26.osim", "frames": 3}, "rows": [{"what": "x"}], "notes": ["n"], "headline": [row],
        "table": "| x |"})
    result = bench_muscles.run(quick=True, sections=("static_optimization",), out_dir=None)
    assert result["meta"]["benchmark"] == "muscles" and result["meta"]["sections"] == ["static_optimization"]
    assert result["rows"] == [] and result["static_optimization"]["rows"] == [{"what": "x"}]
    assert result["headline"] == [row] and result["notes"] == ["static optimization: n"]
    assert result["table"].startswith("Static optimization (arm26.osim, 3 frames)") and "| x |" in result["table"]
    with pytest.raises(ValueError, match="unknown sections"):
        bench_muscles.run(sections=("geometry", "so"), out_dir=None)


def test_bench_muscles_states_lie_in_the_coordinate_ranges(bench):
    from benchmarks import bench_muscles

    model = mb.load_osim(str(bench_muscles.MODELS["arm26"]))
    states = bench_muscles.random_states(model, 64)
    assert states.shape == (64, model.nq)
    assert np.all(states >= np.asarray(model.q_lower)) and np.all(states <= np.asarray(model.q_upper))
    assert np.all(np.ptp(states, axis=0) > 0.5 * np.asarray(model.q_upper - model.q_lower))
    with pytest.raises(SystemExit, match="neither one of"):
        bench_muscles.model_path("nonexistent_model")


def test_bench_gradients_tiny(bench):
    from benchmarks import bench_gradients

    rows = _check(bench_gradients.run(kinds=("none",), chain=2, rounds=1, out_dir=None), "gradients")
    assert [r["derivative"] for r in rows] == ["value", "jax.jacfwd in q", "reverse mode, all arrays of the model"]
    assert rows[0]["times_value"] == 1.0


def test_bench_batches_tiny(bench):
    from benchmarks import bench_batches

    result = bench_batches.run(n=2, batch_sizes=(4,), chunk=2, sims=0, rounds=1, out_dir=None)
    rows = _check(result, "batches")
    assert {r["how"] for r in rows} == {"vmap", "lax.map, chunks of 2"}
    # One CPU device here: the batch split over devices is skipped, and the note says how to ask for more.
    assert result["meta"]["cpu_devices"] == 1
    assert any("JAXMB_CPU_DEVICES" in note for note in result["notes"])


def test_one_script_per_question_and_run_runs_them_all(bench):
    """At most five scripts (issue 34: dynamics, closed chains, muscles, gradients,
    batches), each run by `python -m benchmarks` and named in the README's table."""
    from benchmarks import run

    scripts = sorted(p.stem.removeprefix("bench_") for p in (ROOT / "benchmarks").glob("bench_*.py"))
    assert scripts == sorted(run.SCRIPTS) and len(scripts) <= 5
    readme = (ROOT / "benchmarks" / "README.md").read_text()
    for name in scripts:
        assert f"| `bench_{name}.py` |" in readme, name


def test_run_writes_the_headline_between_the_readme_markers(bench, tmp_path):
    from benchmarks import run

    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{run.START}\nold\n{run.END}\nafter\n")
    meta = bench.meta("dynamics")
    table = run.headline_table({"dynamics": {"meta": meta, "headline": [
        {"what": "w", "jaxmb": "1", "alternative": "2", "script": "bench_dynamics.py"}]}})
    run.update_readme(table, readme)
    text = readme.read_text()
    assert "old" not in text and "| w | 1 | 2 | bench_dynamics.py |" in text and text.endswith(f"{run.END}\nafter\n")


def test_both_readmes_hold_the_same_generated_headline_table():
    """The repository's README shows the table `python -m benchmarks` writes, not figures
    edited by hand: the text between its headline markers is benchmarks/README.md's."""
    from benchmarks import run

    def table(path):
        text = path.read_text()
        return text[text.index(run.START):text.index(run.END)]

    first, *others = (table(path) for path in run.READMES)
    assert len(run.READMES) == 2 and "| what | jaxmb |" in first
    assert all(other == first for other in others)


def test_the_shoulder_section_reads_the_studys_shoulder(bench, shared_dir):
    from benchmarks import _shoulder

    path = shared_dir / "models" / "MOBL_ARMS_fixed_41.osim"
    if not path.exists():
        pytest.skip("MoBL-ARMS is not available")
    assert _shoulder.shoulder(path).nq == 3  # the study's three shoulder coordinates


def test_the_shoulder_section_tiny(bench, tmp_path):
    """Without MoBL-ARMS the closed-chain benchmark's shoulder section says so; its
    comparison at equal accuracy charges each route its cheapest run that reaches a target
    (the MoBL-ARMS compile is minutes, so the run itself is not repeated here:
    `python benchmarks/bench_closed_chains.py --sections shoulder --quick`)."""
    from benchmarks import _shoulder, bench_closed_chains

    result = bench_closed_chains.run(sections=("shoulder",), shoulder_model=tmp_path / "missing.osim", out_dir=None)
    assert result["meta"]["benchmark"] == "closed_chains" and result["meta"]["sections"] == ["shoulder"]
    assert result["rows"] == [] and result["shoulder"]["rows"] == [] and "not found" in result["notes"][0]
    with pytest.raises(ValueError, match="unknown sections"):
        bench_closed_chains.run(sections=("shoulders",), out_dir=None)
    rows = [dict(route="embedded ODE", kind="embedded ODE", tol=1e-7, run_ms=10.0, error=1e-9, steps=600),
            dict(route="embedded ODE", kind="embedded ODE", tol=1e-9, run_ms=20.0, error=1e-11, steps=1200),
            dict(route="DAE, Baumgarte 0", kind="DAE", tol=1e-7, run_ms=40.0, error=5e-9, steps=500),
            dict(route="DAE, Baumgarte 0", kind="DAE", tol=1e-9, run_ms=90.0, error=5e-11, steps=1100)]
    summary = _shoulder.speedups(rows, (1e-8, 1e-10))
    assert [s["speedup"] for s in summary] == [4.0, 4.5]
    for row in _shoulder.headline(summary, [], [dict(batch=8, frames_per_s=1200.0)]):
        assert set(row) == {"what", "jaxmb", "alternative", "script"} and row["script"] == "bench_closed_chains.py"
