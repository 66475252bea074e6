"""The closed-chain benchmark harness runs end to end and reports what it measured.

Speed is not asserted (benchmarks/README.md holds the measured tables); what is
asserted is that every route ran, reached the accuracy its tolerance implies, and
that the speed-up table is built from those rows. A smallest sweep: two tolerances,
Dopri8, one Baumgarte setting, one round.
"""

import json
import pathlib
import subprocess
import sys

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


def test_andrews_work_precision_runs(tmp_path):
    out = tmp_path / "wp.json"
    subprocess.run(
        [sys.executable, str(BENCHMARKS / "andrews_work_precision.py"), "--solvers", "Dopri8", "--baumgarte", "100",
         "--tols", "1e-5,1e-6", "--repeat", "1", "--calls", "1", "--targets", "5", "--no-figure", "--out", str(out)],
        check=True, capture_output=True, text=True, timeout=900,
    )
    saved = json.loads(out.read_text())
    assert saved["model_as"] == "flat" and saved["calls"] == 1
    assert {r["kind"] for r in saved["rows"]} == {"embedded", "pre-modeled", "DAE"}
    for r in saved["rows"]:
        # rtol = atol = 1e-5 and 1e-6 give 4.9-6.3 digits of the Test Set reference
        assert 4.0 < r["digits"] < 8.0, r
        assert 20 < r["steps"] < 200 and r["cpu_s"] > 0.0, r
    rows = {r["kind"]: r for r in saved["rows"] if r["tol"] == 1e-6}
    # The DAE's constraint drift at t1 is measured and reported (the embedded routes have none).
    assert 0.0 < rows["DAE"]["drift"] < 1e-6
    # Implicit and pre-modeled joint functions integrate the same ODE (fit error 2e-15 rad).
    assert abs(rows["embedded"]["digits"] - rows["pre-modeled"]["digits"]) < 0.01
    # Each speed-up charges both sides a run that reaches the target, and the cheapest one.
    assert {s["embedded_kind"] for s in saved["summary"]} == {"embedded", "pre-modeled"}
    for s in saved["summary"]:
        assert s["target_digits"] == 5.0
        for side in ("embedded", "dae"):
            assert s[side]["digits"] >= 5.0
            kind = s[side]["kind"]
            assert s[side]["cpu_s"] == min(r["cpu_s"] for r in saved["rows"] if r["kind"] == kind and r["digits"] >= 5.0)
