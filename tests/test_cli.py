"""The jaxmb command line: the README's main job, on a short horizon."""

import json
import pathlib
import subprocess
import sys

import pytest

from jaxmb.cli import main

# gait2354 (shipped): 54 muscles whose paths compile in seconds (arm26's ellipsoid takes minutes).
GAIT = pathlib.Path(__file__).resolve().parents[1] / "jaxmb" / "data" / "gait2354_simbody.osim"


def test_help_lists_commands():
    out = subprocess.run([sys.executable, "-m", "jaxmb.cli", "--help"], capture_output=True, text=True, check=True)
    assert "simulate" in out.stdout and "moment-arms" in out.stdout


def test_simulate_double_pendulum_writes_figure_and_summary(tmp_path):
    assert main(["simulate", "double-pendulum", "--t1", "2", "--out", str(tmp_path), "--fps", "20"]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["success"] and summary["dtype"] == "float64"
    assert summary["max_relative_energy_drift"] < 1e-10
    assert (tmp_path / "trajectory.png").stat().st_size > 10_000
    assert (tmp_path / "summary.txt").read_text().startswith("jaxmb simulate double-pendulum")
    rows = (tmp_path / "trajectory.csv").read_text().splitlines()
    assert rows[0].startswith("t,q_theta1,q_theta2") and len(rows) == 2 * 20 + 2


def test_unknown_model_is_rejected():
    with pytest.raises(SystemExit):
        main(["simulate", "triple-pendulum"])


@pytest.mark.skipif(not GAIT.exists(), reason="gait2354_simbody.osim not shipped")
def test_moment_arms_of_gait2354(tmp_path):
    assert main(["moment-arms", str(GAIT), "--coordinate", "knee_angle_r", "--out", str(tmp_path), "--n", "7"]) == 0
    lines = (tmp_path / "moment_arms_knee_angle_r.csv").read_text().splitlines()
    assert lines[0].split(",")[0] == "knee_angle_r" and len(lines) == 8
    assert (tmp_path / "moment_arms_knee_angle_r.png").exists()
