"""The jaxmb command line: the README's main job, on a short horizon."""

import json
import os
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
    # In this process, not a fresh one: the persistent compilation cache stays off here,
    # so that the command does not switch it on for the rest of the suite.
    assert main(["simulate", "double-pendulum", "--t1", "2", "--out", str(tmp_path), "--fps", "20",
                 "--compile-cache", "none"]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["success"] and summary["dtype"] == "float64" and summary["compile_cache"] is None
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
    assert main(["moment-arms", str(GAIT), "--coordinate", "knee_angle_r", "--out", str(tmp_path), "--n", "7",
                 "--compile-cache", "none"]) == 0
    lines = (tmp_path / "moment_arms_knee_angle_r.csv").read_text().splitlines()
    assert lines[0].split(",")[0] == "knee_angle_r" and len(lines) == 8
    assert (tmp_path / "moment_arms_knee_angle_r.png").exists()


def test_a_second_run_loads_its_programs_from_the_compilation_cache(tmp_path):
    """Each command keeps its compiled programs in a persistent cache (``--compile-cache``,
    default ``~/.cache/jaxmb/xla``): the first run writes them, the second writes nothing.
    JAX looks a program up before compiling it and stores it after, so a second run that
    adds no entry found every program it needed. JAX stores only programs that took at
    least ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`` to compile (1 s by default); the
    threshold is 0 here, so that every program counts whatever the machine's speed."""
    cache = tmp_path / "cache"
    env = dict(os.environ, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    cmd = [sys.executable, "-m", "jaxmb.cli", "simulate", "double-pendulum", "--t1", "0.5", "--fps", "10",
           "--compile-cache", str(cache)]

    def run(out):
        subprocess.run(cmd + ["--out", str(tmp_path / out)], env=env, check=True, capture_output=True)
        return json.loads((tmp_path / out / "summary.json").read_text())

    first = run("first")
    assert first["compile_cache"] == str(cache)
    stored = {f: f.stat().st_mtime_ns for f in cache.rglob("*") if f.is_file()}
    assert stored, "the first run wrote nothing to the compilation cache"
    second = run("second")
    assert {f: f.stat().st_mtime_ns for f in cache.rglob("*") if f.is_file()} == stored
    assert second["q_final"] == first["q_final"]


def test_the_compilation_cache_defaults_to_jax_s_variable_then_the_user_cache(tmp_path):
    """Without ``--compile-cache`` a command keeps the folder JAX_COMPILATION_CACHE_DIR names,
    and without that uses $XDG_CACHE_HOME/jaxmb/xla, or none where that cannot be made; a
    folder the variable names that cannot be used is an error."""
    probe = ("from jaxmb.cli import _use_compile_cache; import jax; "
             "print(_use_compile_cache(None), jax.config.jax_compilation_cache_dir)")
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}

    def chosen(**extra):
        out = subprocess.run([sys.executable, "-c", probe], env=dict(env, **extra), capture_output=True, text=True,
                             check=True)
        return out.stdout.split()

    user = str(tmp_path / "xdg" / "jaxmb" / "xla")
    assert chosen(XDG_CACHE_HOME=str(tmp_path / "xdg")) == [user, user]
    assert chosen(XDG_CACHE_HOME=str(tmp_path / "xdg"), JAX_COMPILATION_CACHE_DIR=str(tmp_path / "own")) == [
        str(tmp_path / "own")] * 2
    # A default folder that cannot be made: no cache, and the command goes on.
    (tmp_path / "file").write_text("")
    assert chosen(XDG_CACHE_HOME=str(tmp_path / "file")) == ["None", "None"]
    # One the user named in JAX's variable: an error naming the variable.
    out = subprocess.run([sys.executable, "-c", probe], env=dict(env, JAX_COMPILATION_CACHE_DIR=str(tmp_path / "file")),
                         capture_output=True, text=True)
    assert out.returncode != 0 and "JAX_COMPILATION_CACHE_DIR" in out.stderr and "cannot use" in out.stderr


def test_an_unusable_compilation_cache_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(SystemExit, match="--compile-cache .*a_file/cache: cannot use this folder"):
        main(["simulate", "double-pendulum", "--t1", "0.1", "--compile-cache", str(blocker / "cache"),
              "--out", str(tmp_path)])
