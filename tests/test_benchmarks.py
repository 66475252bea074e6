"""The closed-chain benchmark harness runs end to end and reports what it measured.

Speed is not asserted (benchmarks/README.md holds the measured tables); what is
asserted is that every route ran, reached the accuracy its tolerance implies, and
that the speed-up table is built from those rows. A smallest sweep: two tolerances,
Dopri8, one Baumgarte setting, one round.
"""

import json
import os
import pathlib
import subprocess
import sys

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


def test_andrews_work_precision_runs(tmp_path):
    out = tmp_path / "wp.json"
    subprocess.run(
        [sys.executable, str(BENCHMARKS / "andrews_work_precision.py"), "--solvers", "Dopri8", "--baumgarte", "100",
         "--tols", "1e-5,1e-6", "--order", "12,24", "--quintic", "", "--repeat", "1", "--calls", "1", "--targets",
         "5", "--no-figure", "--out", str(out)],
        check=True, capture_output=True, text=True, timeout=900,
    )
    saved = json.loads(out.read_text())
    assert saved["model_as"] == "flat" and saved["calls"] == 1
    # On a CPU a run is charged CPU time; the flags it ran with are recorded.
    assert saved["timing"] == "CPU time" and saved["device_kind"] == "cpu"
    assert "--xla_cpu_use_fusion_emitters=false" in saved["xla_flags"]
    assert {r["kind"] for r in saved["rows"]} == {"embedded", "pre-modeled", "DAE"}
    for r in saved["rows"]:
        # rtol = atol = 1e-5 and 1e-6 give 4.9-6.3 digits of the Test Set reference
        assert 4.0 < r["digits"] < 8.0, r
        assert 20 < r["steps"] < 200 and r["cpu_s"] > 0.0, r
    # Each fit order is a pre-modeled configuration of its own, with its fit error
    # recorded (the quintic splines' configuration: the --no-trajectory test below).
    assert saved["order"] == [12, 24] and set(saved["fit_errors"]) == {"12", "24"}
    assert 1e-11 < saved["fit_errors"]["12"] < 1e-9 and saved["fit_errors"]["24"] < 1e-13
    assert saved["quintic"] == [] and {r["route"] for r in saved["rows"] if r["kind"] == "pre-modeled"} == {
        "embedded ODE, pre-modeled (order 12), Dopri8", "embedded ODE, pre-modeled (order 24), Dopri8"}
    at_1e6 = [r for r in saved["rows"] if r["tol"] == 1e-6]
    rows = {r["kind"]: r for r in at_1e6 if "order 12" not in r["route"]}
    # The DAE's constraint drift at t1 is measured and reported (the embedded routes have none).
    assert 0.0 < rows["DAE"]["drift"] < 1e-6
    # Implicit and pre-modeled joint functions integrate the same ODE (fit errors 1e-10 and
    # 2e-15 rad, far below these runs' errors).
    for r in at_1e6:
        if r["kind"] == "pre-modeled":
            assert abs(rows["embedded"]["digits"] - r["digits"]) < 0.01, r
    # Each speed-up charges both sides a run that reaches the target, and the cheapest one.
    assert {s["embedded_kind"] for s in saved["summary"]} == {"embedded", "pre-modeled"}
    for s in saved["summary"]:
        assert s["target_digits"] == 5.0
        for side in ("embedded", "dae"):
            assert s[side]["digits"] >= 5.0
            kind = s[side]["kind"]
            assert s[side]["cpu_s"] == min(r["cpu_s"] for r in saved["rows"] if r["kind"] == kind and r["digits"] >= 5.0)
    # Accuracy along the trajectory is measured for every run, from the same steps.
    for r in saved["rows"]:
        assert 4.0 < r["trajectory_digits"] < 8.0, r
    for r in at_1e6:
        if r["kind"] == "pre-modeled":
            assert abs(rows["embedded"]["trajectory_digits"] - r["trajectory_digits"]) < 0.01, r
    # ... and it is a different number from the digits at t = 0.03 alone.
    assert any(abs(r["trajectory_digits"] - r["digits"]) > 0.05 for r in saved["rows"])

    # A saved run re-summarized on the trajectory digits charges runs that reach them.
    summary = subprocess.run(
        [sys.executable, str(BENCHMARKS / "andrews_work_precision.py"), "--summarize", str(out), "--accuracy",
         "trajectory", "--targets", "4.5", "--no-figure"], check=True, capture_output=True, text=True, timeout=300,
    ).stdout
    reaching = [r for r in saved["rows"] if r["trajectory_digits"] >= 4.5]
    cheapest = min((r for r in reaching if r["kind"] == "DAE"), key=lambda r: r["cpu_s"])
    assert f"{cheapest['route']}, tol {cheapest['tol']:.0e}" in summary
    # ... and splits the speed-up into its two factors: the fewest steps of each side at
    # exactly 4.5 digits (linear in digits between its two tolerances), and their ratio.
    def steps_at(route):
        lo, hi = sorted((r for r in saved["rows"] if r["route"] == route), key=lambda r: -r["tol"])
        if lo["trajectory_digits"] >= 4.5:
            return lo["steps"]
        w = (4.5 - lo["trajectory_digits"]) / (hi["trajectory_digits"] - lo["trajectory_digits"])
        return lo["steps"] + w * (hi["steps"] - lo["steps"])

    fewest = {kind: min(steps_at(r["route"]) for r in saved["rows"] if r["kind"] == kind)
              for kind in ("pre-modeled", "DAE")}
    line = next(ln for ln in summary.splitlines() if ln.startswith("Dopri8") and ln.split()[1] == "4.5")
    cells = line.split()
    assert float(cells[2]) == round(fewest["pre-modeled"]) and float(cells[4]) == round(fewest["DAE"])
    assert abs(float(cells[-2].rstrip("x")) - fewest["DAE"] / fewest["pre-modeled"]) < 0.006
    # A run saved before trajectory digits existed is refused, not summarized on endpoint digits.
    old = tmp_path / "old.json"
    old.write_text(json.dumps(dict(saved, rows=[{k: v for k, v in r.items() if k != "trajectory_digits"}
                                                for r in saved["rows"]])))
    refused = subprocess.run(
        [sys.executable, str(BENCHMARKS / "andrews_work_precision.py"), "--summarize", str(old), "--accuracy",
         "trajectory", "--no-figure"], capture_output=True, text=True, timeout=300,
    )
    assert refused.returncode != 0 and "predates trajectory_digits" in refused.stderr


def test_andrews_work_precision_runs_the_seeds_own_experiment(tmp_path):
    # --case dissertation: 0..0.05 s from beta = -0.0620 rad at rest, the run the seed's
    # 4x was measured on. The script itself refuses to time anything unless the DAE,
    # started from the loop's assembly at that beta, agrees with the embedded reference
    # to 1e-9 rad over the whole run.
    out = tmp_path / "wp.json"
    subprocess.run(
        [sys.executable, str(BENCHMARKS / "andrews_work_precision.py"), "--case", "dissertation", "--solvers",
         "Dopri8", "--baumgarte", "100", "--tols", "1e-6", "--quintic", "", "--repeat", "1", "--calls", "1",
         "--targets", "5", "--accuracy", "trajectory", "--no-figure", "--out", str(out)],
        check=True, capture_output=True, text=True, timeout=900,
    )
    saved = json.loads(out.read_text())
    assert saved["case"] == "dissertation" and saved["t1"] == 0.05 and saved["beta0"] == -0.0620
    rows = {r["kind"]: r for r in saved["rows"]}
    assert set(rows) == {"embedded", "pre-modeled", "DAE"}
    for r in rows.values():
        # Digits at t = 0.05 against the reference run's end point, and along the run.
        assert 4.5 < r["digits"] < 8.0 and 4.5 < r["trajectory_digits"] < 8.0, r
        # A longer run than the Test Set's 0.03 s: more steps than its 43-55 at 1e-6.
        assert 60 < r["steps"] < 300, r
    assert abs(rows["embedded"]["trajectory_digits"] - rows["pre-modeled"]["trajectory_digits"]) < 0.01
    assert 0.0 < rows["DAE"]["drift"] < 1e-6


def test_andrews_work_precision_without_the_densely_saved_runs(tmp_path):
    # --no-trajectory (for GPU runs, where compilation dominates): endpoint digits only,
    # and no trajectory digits claimed.
    script = str(BENCHMARKS / "andrews_work_precision.py")
    refused = subprocess.run([sys.executable, script, "--no-trajectory", "--accuracy", "trajectory"],
                             capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0 and "--no-trajectory measures no trajectory digits" in refused.stderr
    out = tmp_path / "wp.json"
    run = subprocess.run(
        [sys.executable, script, "--solvers", "Tsit5", "--baumgarte", "100", "--tols", "1e-5", "--quintic", "512",
         "--repeat", "2", "--calls", "1", "--targets", "3", "--no-trajectory", "--model-as", "constant",
         "--no-figure", "--out", str(out)],
        check=True, capture_output=True, text=True, timeout=900,
    ).stdout
    # Neither the densely saved runs nor the 1e-13 reference run are compiled.
    assert "dense runs" not in run and "no trajectory reference" in run and run.count("timing: round") == 2
    saved = json.loads(out.read_text())
    # The model compiled in (a fixed model, as jax.jit of a closure over it gives); the
    # checks below are those the model passed as an argument meets.
    assert saved["model_as"] == "constant"
    assert {r["kind"] for r in saved["rows"]} == {"embedded", "pre-modeled", "DAE"}
    for r in saved["rows"]:
        assert "trajectory_digits" not in r and 3.0 < r["digits"] < 5.0 and r["cpu_s"] > 0.0, r
    # The quintic splines are a pre-modeled configuration of their own, beside the
    # Fourier fit, with their fit error recorded; they integrate the same ODE.
    assert saved["quintic"] == [512] and saved["quintic_fit_errors"]["512"] < 1e-14
    fits = {r["route"]: r for r in saved["rows"] if r["kind"] == "pre-modeled"}
    assert set(fits) == {"embedded ODE, pre-modeled (order 24), Tsit5", "embedded ODE, pre-modeled (quintic, 512), Tsit5"}
    a, b = fits.values()
    assert abs(a["digits"] - b["digits"]) < 0.01 and a["steps"] == b["steps"]


def test_fusion_emitter_flag_is_set_only_where_jaxlib_knows_it(monkeypatch):
    # jaxlib 0.11 dropped the flag and XLA aborts on an unknown one: a benchmark started
    # with jax 0.11 (the GPU image's) must leave it out.
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import _xla_flags

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


def test_endpoint_digits_is_the_worst_angles_relative_error(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from bench_andrews import endpoint_digits
    import numpy as np

    reference = np.arange(1.0, 8.0)
    angles = reference.copy()
    angles[2] *= 1.0 + 1e-5
    angles[6] *= 1.0 - 1e-7
    assert abs(endpoint_digits(angles, reference) - 5.0) < 1e-9
    assert endpoint_digits(reference, reference) == 17.0


def test_trajectory_digits_is_the_worst_angles_relative_rms_error(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from andrews_work_precision import trajectory_digits
    import numpy as np

    t = np.linspace(0.01, 1.0, 50)
    reference = np.stack([np.sin(k * t) + 2.0 for k in range(1, 8)], axis=1)
    path = reference.copy()
    path[:, 3] *= 1.0 + 1e-6       # one angle off by 1e-6 relative everywhere
    path[:, 5] += 1e-8             # another by far less
    assert abs(trajectory_digits(path, reference) - 6.0) < 1e-9
    path[-1, 0] += 1.0             # one bad point of 50 in a third angle now dominates
    expected = -np.log10(np.sqrt(1.0 / 50) / np.sqrt(np.mean(reference[:, 0] ** 2)))
    assert abs(trajectory_digits(path, reference) - expected) < 1e-9 and expected < 1.5


def test_gradient_crossover_scales_the_first_k_arrays_each_by_its_own_factor(monkeypatch):
    # scripts/check_gradient_cost.py --crossover times derivatives in k parameters, each
    # a factor on one array of the model; a wrong mapping would time the wrong problem.
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.syspath_prepend(str(BENCHMARKS.parent / "scripts"))
    from check_gradient_cost import scaled_arrays
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np
    import pytest

    from jaxmb import models

    model = models.double_pendulum()
    before = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))
    after = jax.tree_util.tree_leaves(eqx.filter(scaled_arrays(model, jnp.array([0.5, 0.0, 2.0])),
                                                 eqx.is_inexact_array))
    factors = [1.5, 1.0, 3.0] + [1.0] * (len(before) - 3)
    assert len(after) == len(before) > 3
    for x, y, c in zip(before, after, factors):
        np.testing.assert_array_equal(y, x * c)
    with pytest.raises(ValueError, match="floating-point arrays"):
        scaled_arrays(model, jnp.zeros(len(before) + 1))
