"""The jaxmb command line: the README's main job on a short horizon, and the boundary a
user touches (one-line errors that name the argument or the cause, --version, info,
units in CSV headers, readable plots, a compilation cache that stores the main job).

Commands run in this process through ``jaxmb.cli.main``; a subprocess only where a fresh
process is the point (what the user sees on a terminal, what a second process finds
in the compilation cache, what importing jaxmb leaves switched off).
"""

import json
import os
import pathlib
import subprocess
import sys
from importlib import metadata

import jax
import matplotlib
import numpy as np
import pytest

import jaxmb
from jaxmb.cli import main

matplotlib.use("Agg")

DATA = pathlib.Path(__file__).resolve().parents[1] / "jaxmb" / "data"
# gait2354 (shipped): 54 muscles whose paths compile in seconds (arm26's ellipsoid takes minutes).
GAIT = DATA / "gait2354_simbody.osim"
ARM26 = DATA / "arm26.osim"
# A short run of the main job, without the persistent cache: in this process, the command
# would otherwise switch the cache on for the rest of the suite.
SHORT = ["--t1", "0.5", "--fps", "10", "--compile-cache", "none"]


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("jaxmb: error: "), err
    return err[0]


def test_help_lists_commands(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "simulate" in out and "moment-arms" in out and "info" in out


def test_simulate_double_pendulum_writes_figure_csv_with_units_and_summary(tmp_path):
    assert main(["simulate", "double-pendulum", "--t1", "2", "--out", str(tmp_path), "--fps", "20",
                 "--compile-cache", "none"]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["success"] and summary["dtype"] == "float64" and summary["compile_cache"] is None
    assert summary["max_relative_energy_drift"] < 1e-10
    assert summary["units"]["q"] == ["rad", "rad"]
    assert (tmp_path / "trajectory.png").stat().st_size > 10_000
    assert (tmp_path / "summary.txt").read_text().startswith("jaxmb simulate double-pendulum")
    rows = (tmp_path / "trajectory.csv").read_text().splitlines()
    assert rows[0] == "time [s],theta1 [rad],theta2 [rad],theta1_dot [rad/s],theta2_dot [rad/s],energy [J]"
    assert len(rows) == 2 * 20 + 2


def test_simulate_saves_the_samples_its_rate_asks_for(tmp_path):
    """0.29 s at 100 per second: 30 samples 0.01 s apart (before: int(28.999999999999996) + 1 =
    29 samples, 0.0104 s apart)."""
    assert main(["simulate", "double-pendulum", "--t1", "0.29", "--fps", "100", "--out", str(tmp_path),
                 "--compile-cache", "none", "--no-progress"]) == 0
    times = np.loadtxt(tmp_path / "trajectory.csv", delimiter=",", skiprows=1)[:, 0]
    assert times.size == 30
    np.testing.assert_allclose(np.diff(times), 0.01, rtol=1e-12)


def test_a_negative_span_is_one_line_on_stderr_without_traceback_and_makes_no_folder(tmp_path):
    """What a user sees on a terminal: one line naming --t1, exit status 2, no folder."""
    out = tmp_path / "results"
    run = subprocess.run([sys.executable, "-m", "jaxmb.cli", "simulate", "double-pendulum", "--t1", "-1",
                          "--out", str(out)], capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr.splitlines() == [
        "jaxmb: error: argument --t1: the final time must be after the start t0 = 0 s, got -1"]
    assert "Traceback" not in run.stderr and run.stdout == ""
    assert not out.exists()


def test_debug_shows_the_error_with_its_traceback(tmp_path):
    from jaxmb.cli._errors import UsageError

    with pytest.raises(UsageError, match="--t1"):
        main(["simulate", "double-pendulum", "--t1", "-1", "--out", str(tmp_path / "r"), "--debug"])


@pytest.mark.parametrize("args, names", [
    (["--t1", "0"], ["--t1", "after the start"]),
    (["--t1", "nan"], ["--t1", "finite"]),
    (["--t1", "inf"], ["--t1", "finite"]),
    (["--t1", "ten"], ["--t1", "number"]),
    (["--rtol", "-1"], ["--rtol", "[1e-15, 1)"]),
    (["--rtol", "1e-20"], ["--rtol", "1e-15"]),
    (["--atol", "-1"], ["--atol", ">= 0"]),
    (["--fps", "0"], ["--fps", "> 0"]),
    (["--t1", "2", "--fps", "0.1"], ["--fps", "fewer than 2 samples"]),
    (["--t1", "1e9"], ["--fps", "more than"]),
    (["--max-steps", "0"], ["--max-steps", ">= 1"]),
    (["--solver", "euler"], ["--solver", "euler"]),
])
def test_bad_arguments_are_one_line_usage_errors_before_any_output(tmp_path, capsys, args, names):
    out = tmp_path / "results"
    assert main(["simulate", "double-pendulum", "--out", str(out), *args]) == 2
    line = _error_line(capsys)
    for name in names:
        assert name in line
    assert not out.exists()


def test_bad_arguments_of_other_models_and_folders(tmp_path, capsys):
    assert main(["simulate", "planar-chain", "--n", "0", "--out", str(tmp_path / "a")]) == 2
    assert "--n" in _error_line(capsys)
    assert main(["simulate", "three-link-arm", "--pid", "--out", str(tmp_path / "a")]) == 2
    assert "--pid" in _error_line(capsys)
    for command in (["simulate", "double-pendulum", "--n", "3", "--out", str(tmp_path / "a")],
                    ["info", "double-pendulum", "--n", "5"]):  # ignored before
        assert main(command) == 2
        assert "argument --n: the number of links is for planar-chain, not double-pendulum" in _error_line(capsys)
    assert main(["simulate", "triple-pendulum"]) == 2
    line = _error_line(capsys)
    assert "model" in line and "triple-pendulum" in line
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert main(["simulate", "double-pendulum", "--out", str(blocker), *SHORT]) == 2
    assert "--out" in _error_line(capsys)
    assert main(["simulate", "double-pendulum", "--out", str(blocker / "sub"), *SHORT]) == 2
    line = _error_line(capsys)
    assert "--out" in line and "is not a folder" in line
    assert not (tmp_path / "a").exists()
    assert main(["simulate", "double-pendulum", "--out", "", *SHORT]) == 2  # it wrote into the current folder
    assert "--out: give a folder name" in _error_line(capsys)



@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_an_out_folder_that_cannot_be_made_is_named_before_the_run(tmp_path, capsys):
    """Before: /proc passed the permission check for root, and the run failed with a
    traceback when it wrote its results, after computing them."""
    assert main(["simulate", "double-pendulum", "--out", "/proc/jaxmb_test/out", *SHORT]) == 2
    assert "--out: cannot make /proc/jaxmb_test/out" in _error_line(capsys)
    from jaxmb.cli._paths import check_out_folder

    assert check_out_folder(str(tmp_path / "a" / "b")) == tmp_path / "a" / "b"
    assert not (tmp_path / "a").exists()  # checked by making it, and taken away again


def test_a_failed_simulation_is_an_error_naming_the_cause(tmp_path, capsys):
    assert main(["simulate", "double-pendulum", "--max-steps", "5", "--out", str(tmp_path), *SHORT]) == 1
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxmb: error: the simulation failed at t = ")
    assert "--max-steps" in err[0]
    assert "success: False" in captured.out
    assert json.loads((tmp_path / "summary.json").read_text())["success"] is False
    # Before: the summary named a figure it had not made, labelled the last state q(t1), and
    # wrote a bare NaN into summary.json (not JSON: strict readers refuse it).
    text = (tmp_path / "summary.json").read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"summary.json holds {c}"))
    saved = len((tmp_path / "trajectory.csv").read_text().splitlines()) - 1
    assert ("trajectory.png" in captured.out) == (saved > 0) == (tmp_path / "trajectory.png").exists()
    assert "q(t1)" not in captured.out and "q(t = " in captured.out


def test_missing_and_broken_model_files_are_one_line_errors(tmp_path, capsys):
    missing = tmp_path / "missing.osim"
    for command in (["info", str(missing)], ["moment-arms", str(missing), "--coordinate", "x", "--out",
                                             str(tmp_path / "r"), "--compile-cache", "none"]):
        assert main(command) == 1
        line = _error_line(capsys)
        assert str(missing) in line and "no such model file" in line
    broken = tmp_path / "broken.osim"
    broken.write_text("<OpenSimDocument><Model name='x'>")
    assert main(["info", str(broken)]) == 1
    line = _error_line(capsys)
    assert str(broken) in line and "not well-formed XML" in line
    assert not (tmp_path / "r").exists()


def test_a_model_error_from_the_library_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad_mass.osim"
    bad.write_text(ARM26.read_text().replace("<mass>1.8645719999999999</mass>", "<mass>-1</mass>"))
    assert main(["info", str(bad)]) == 1
    line = _error_line(capsys)
    assert str(bad) in line and "mass" in line


@pytest.mark.skipif(not GAIT.exists(), reason="gait2354_simbody.osim not shipped")
def test_an_unknown_coordinate_is_one_line_naming_it(tmp_path, capsys):
    assert main(["moment-arms", str(GAIT), "--coordinate", "elbow", "--out", str(tmp_path / "r"),
                 "--compile-cache", "none"]) == 1
    line = _error_line(capsys)
    assert "'elbow'" in line and "knee_angle_r" in line
    assert not (tmp_path / "r").exists()


def test_version_comes_from_the_package_metadata(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"jaxmb {metadata.version('jaxmb')}"
    assert jaxmb.__version__ == metadata.version("jaxmb")


def test_info_of_arm26_lists_coordinates_bodies_muscles_wraps_and_skipped_forces(tmp_path, capsys):
    text = ARM26.read_text().replace(
        '<ForceSet name="forceset">\n\t\t\t<objects>',
        '<ForceSet name="forceset">\n\t\t\t<objects>\n<CoordinateActuator name="shoulder_motor">'
        '<coordinate>r_shoulder_elev</coordinate></CoordinateActuator>'
        '<SpringGeneralizedForce name="shoulder_spring"><coordinate>r_shoulder_elev</coordinate>'
        '</SpringGeneralizedForce>', 1)
    model = tmp_path / "arm26_actuated.osim"
    model.write_text(text)
    assert main(["info", str(model)]) == 0
    out = capsys.readouterr().out
    assert "r_elbow_flex" in out and "range [0, 2.26893]  ([0, 130] deg)" in out
    assert "r_humerus  " in out and "1.86457 kg" in out
    assert "muscles: 6" in out and "BIClong" in out and "Thelen2003Muscle" in out
    assert "TRIlonghh (WrapEllipsoid on r_humerus)" in out
    assert "other forces: 1 (actuators in control order: shoulder_motor)" in out
    assert "shoulder_motor  CoordinateActuator on r_shoulder_elev" in out
    assert "SpringGeneralizedForce (shoulder_spring)" in out  # skipped, and said so


@pytest.mark.skipif(not GAIT.exists(), reason="gait2354_simbody.osim not shipped")
def test_info_gives_translational_coordinates_in_metres(capsys):
    assert main(["info", str(GAIT)]) == 0
    lines = capsys.readouterr().out.splitlines()
    tx = next(line for line in lines if line.strip().startswith("pelvis_tx"))
    knee = next(line for line in lines if line.strip().startswith("knee_angle_r"))
    assert " m " in tx and "deg" not in tx
    assert " rad " in knee and "([-120, 10] deg)" in knee


def test_info_names_a_path_given_as_a_polynomial(capsys):
    fitted = pathlib.Path(__file__).parent / "data" / "opensim" / "arm26_function_paths.osim"
    assert main(["info", str(fitted)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("TRIlong"))
    assert line.endswith("path a polynomial of order 5 in 2 coordinates"), line


def test_info_of_a_built_in_model(capsys):
    assert main(["info", "double-pendulum"]) == 0
    out = capsys.readouterr().out
    assert "theta1" in out and "theta2" in out and "muscles: none" in out


def test_info_of_a_setup_file_says_it_is_not_a_model(capsys):
    """Before: 'Version 20302 is an OpenSim 3.x file... open it in OpenSim 4'."""
    setup = pathlib.Path(__file__).parent / "data" / "opensim" / "motion" / "subject01_Setup_InverseDynamics.xml"
    assert '<OpenSimDocument Version="20302">' in setup.read_text()
    assert main(["info", str(setup)]) == 1
    assert "holds <InverseDynamicsTool>, not a <Model>: this is not an .osim model" in capsys.readouterr().err


@pytest.mark.skipif(not GAIT.exists(), reason="gait2354_simbody.osim not shipped")
def test_moment_arms_of_gait2354_with_units_in_the_csv_header(tmp_path, capsys):
    # With a force the importer skips, whose warning comes as one line.
    model = tmp_path / "gait2354_actuated.osim"
    model.write_text(GAIT.read_text().replace(
        '<ForceSet name="forceset">\n\t\t\t<objects>',
        '<ForceSet name="forceset">\n\t\t\t<objects>\n<SpringGeneralizedForce name="knee_spring">'
        '<coordinate>knee_angle_r</coordinate></SpringGeneralizedForce>', 1))
    # --progress: the sweep reports its states chunk by chunk (16 at a time; 7 here).
    assert main(["moment-arms", str(model), "--coordinate", "knee_angle_r", "--out", str(tmp_path), "--n", "7",
                 "--compile-cache", "none", "--progress"]) == 0
    err = capsys.readouterr().err
    assert "compiling and computing the moment arms... 7/7 states" in err
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and warnings[0].startswith("jaxmb: warning: ")
    assert "SpringGeneralizedForce (knee_spring)" in warnings[0]
    lines = (tmp_path / "moment_arms_knee_angle_r.csv").read_text().splitlines()
    header = lines[0].split(",")
    assert header[0] == "knee_angle_r [rad]" and len(header) == 55
    assert all(h.endswith(" [m]") for h in header[1:]) and "bifemsh_r [m]" in header
    assert len(lines) == 8
    assert (tmp_path / "moment_arms_knee_angle_r.png").exists()
    # OpenSim's computeMomentArm into files of their own: on gait2354 (no wraps; MovingPathPoints
    # at the knee, whose motion both count) it is -dL/dq
    assert main(["moment-arms", str(model), "--coordinate", "knee_angle_r", "--out", str(tmp_path), "--n", "7",
                 "--compile-cache", "none", "--frozen-path"]) == 0
    frozen = (tmp_path / "moment_arms_knee_angle_r_frozen_path.csv").read_text().splitlines()
    assert frozen[0] == lines[0] and (tmp_path / "moment_arms_knee_angle_r_frozen_path.png").exists()
    a, b = (np.loadtxt(x[1:], delimiter=",") for x in (lines, frozen))
    assert np.max(np.abs(a[:, 1:])) > 0.01
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-12)


def _stopping_at(calls, keyword):
    """A stand-in that records the `keyword` argument it is called with, then stops the command."""
    def stub(*args, **kwargs):
        calls.append(kwargs.get(keyword))
        raise ValueError("stop here")
    return stub


def test_muscle_commands_load_the_wrap_geometry_asked_for(tmp_path, monkeypatch, capsys):
    import jaxmb._muscles as muscles
    import jaxmb.io._osim as osim

    seen = []
    monkeypatch.setattr(osim, "load_osim", _stopping_at(seen, "wrap_geometry"))
    base = ["moment-arms", str(GAIT), "--coordinate", "knee_angle_r", "--out", str(tmp_path), "--compile-cache", "none"]
    assert main(base) == 1 and main(base + ["--wrap-geometry", "opensim"]) == 1
    assert seen == ["converged", "opensim"]
    # --frozen-path reaches the sweep as OpenSim's computeMomentArm route
    gait = jaxmb.load_osim(GAIT)
    monkeypatch.setattr(osim, "load_osim", lambda path, *, wrap_geometry=None, function_paths=None: gait)
    methods = []
    monkeypatch.setattr(muscles, "moment_arm_sweep", _stopping_at(methods, "method"))
    assert main(base) == 1 and main(base + ["--frozen-path"]) == 1
    assert methods == ["autodiff", "frozen_path"]
    capsys.readouterr()
    assert main(base + ["--wrap-geometry", "helix"]) == 2
    assert "--wrap-geometry: invalid choice: 'helix'" in capsys.readouterr().err


def test_static_optimization_command_passes_its_wrap_geometry_and_moment_arm_route(tmp_path, monkeypatch):
    setup = pathlib.Path(__file__).parent / "data" / "opensim" / "motion" / "arm26_Setup_StaticOptimization.xml"
    so = ["static-optimization", "--setup", str(setup), "--out", str(tmp_path / "so")]
    with monkeypatch.context() as m:
        seen = []
        m.setattr(jaxmb.io, "read_osim", _stopping_at(seen, "wrap_geometry"))
        assert main(so) == 1 and main(so + ["--wrap-geometry", "opensim"]) == 1
        assert seen == ["converged", "opensim"]
    routes = []
    monkeypatch.setattr(jaxmb, "static_optimization", _stopping_at(routes, "moment_arms"))
    assert main(so) == 1 and main(so + ["--frozen-path"]) == 1
    assert routes == ["closed_form", "frozen_path"]


@pytest.mark.parametrize("failed, status", [(2, 0), (4, 1)])
def test_static_optimization_names_its_failed_frames_and_fails_when_all_did(tmp_path, monkeypatch, capsys, failed,
                                                                            status):
    """The command said "N frames have no solution within the bounds (the model is too weak
    there)" also where the solve had not converged, named no frame, and exited 0 with every
    frame failed. (The solve is replaced: what is checked is the command's report.)"""
    import types

    setup = pathlib.Path(__file__).parent / "data" / "opensim" / "motion" / "arm26_Setup_StaticOptimization.xml"
    ok = jax.numpy.arange(4) >= failed

    def solved(model, *args, **kwargs):
        k, n = 4, len(model.muscles)
        return types.SimpleNamespace(
            time=np.linspace(0.0, 0.3, k), activations=np.full((k, n), 0.1), controls=np.zeros((k, 0)),
            muscle_forces=np.ones((k, n)), actuator_forces=np.zeros((k, 0)), torque_residual=np.zeros(k),
            result=jax.vmap(lambda o: jaxmb.RESULTS.where(o, jaxmb.RESULTS.successful,
                                                          jaxmb.RESULTS.static_optimization_failed))(ok),
            muscle_names=model.muscle_names, actuator_names=())

    monkeypatch.setattr(jaxmb, "static_optimization", solved)
    assert main(["static-optimization", "--setup", str(setup), "--out", str(tmp_path / "so"),
                 "--compile-cache", "none", "--no-progress"]) == status
    err = capsys.readouterr().err
    head = "jaxmb: error: static optimization failed at every frame: " if status else "jaxmb: warning: "
    assert head + f"{failed} of 4 frames (t = 0, 0.1" in err and "or their solve did not converge" in err
    assert (tmp_path / "so" / "arm26_StaticOptimization_activation.sto").exists()  # written for inspection


def test_many_curves_go_to_panels_with_legends_outside_the_axes():
    import matplotlib.pyplot as plt
    import numpy as np

    from jaxmb.io._report import curve_groups, plot_groups

    groups = curve_groups(50)
    assert [k for g in groups for k in g] == list(range(50))
    assert max(len(g) for g in groups) <= 8 and len(groups) == 7
    assert len(curve_groups(500)) <= 12
    x = np.linspace(0, 1, 5)
    ys = np.outer(x, np.arange(50))
    fig, axes = plt.subplots(len(groups), 1)
    plot_groups(axes, x, ys, [f"muscle_{k}" for k in range(50)], groups, "R [cm]")
    fig.canvas.draw()
    for ax in axes:
        legend = ax.get_legend()
        assert legend.get_window_extent().x0 >= ax.get_window_extent().x1
    plt.close(fig)


def test_progress_is_shown_on_stderr_while_compiling_and_computing(tmp_path, capsys):
    assert main(["simulate", "double-pendulum", "--out", str(tmp_path), "--progress", *SHORT]) == 0
    err = capsys.readouterr().err
    assert "tracing and compiling" in err and "integrating" in err


def test_importing_jaxmb_or_its_cli_leaves_x64_off_and_starts_no_backend():
    """No backend started on import: the command's XLA flag (read when the first computation
    starts one) still takes effect when it is set after ``import jaxmb``."""
    probe = ("import jax, jaxmb, jaxmb.cli; from jax._src import xla_bridge; "
             "print(jax.config.jax_enable_x64, xla_bridge.backends_are_initialized())")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env={k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"})
    assert out.stdout.strip() == "False False"


def test_the_command_turns_the_cpu_fusion_emitters_off_unless_the_user_set_xla_flags(monkeypatch, tmp_path,
                                                                                      capsys):
    from jaxmb.cli import _xla_flags

    monkeypatch.setattr(_xla_flags, "version", lambda name: "0.10.2")  # a jaxlib that knows the flag
    missing = ["moment-arms", str(tmp_path / "none.osim"), "--coordinate", "x", "--compile-cache", "none"]
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert main(missing) == 1
    assert os.environ["XLA_FLAGS"] == _xla_flags.FUSION_EMITTERS_OFF
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    assert main(missing) == 1
    assert os.environ["XLA_FLAGS"] == "--xla_dump_to=/tmp/x"
    assert "none.osim" in capsys.readouterr().err


def test_a_second_run_loads_the_main_job_from_the_compilation_cache(tmp_path):
    """Each command keeps its compiled programs in a persistent cache (``--compile-cache``,
    default ``~/.cache/jaxmb/xla``). JAX stores only programs whose XLA compilation took at
    least ``jax_persistent_cache_min_compile_time_secs`` (1 s by default), which the main
    job's program can fall under; the command sets it to 0, so the first run stores its
    programs and the second loads them and stores none. Two processes: a second run in
    this one would find its programs in memory."""
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES")}
    cmd = [sys.executable, "-m", "jaxmb.cli", "simulate", "double-pendulum", "--t1", "0.5", "--fps", "10",
           "--compile-cache", str(cache)]

    def run(out):
        subprocess.run(cmd + ["--out", str(tmp_path / out)], env=env, check=True, capture_output=True)
        return json.loads((tmp_path / out / "summary.json").read_text())

    first = run("first")
    assert first["compile_cache"] == str(cache) and first["compile_cache_stored"] > 0
    assert any(cache.rglob("*")), "the first run wrote nothing to the compilation cache"
    second = run("second")
    assert second["compile_cache_loaded"] >= first["compile_cache_stored"]
    assert second["compile_cache_stored"] == 0
    assert second["q_final"] == first["q_final"]


def test_the_compilation_cache_defaults_to_jax_s_variable_then_the_user_cache(tmp_path):
    """Without ``--compile-cache`` a command keeps the folder JAX_COMPILATION_CACHE_DIR names,
    and without that uses $XDG_CACHE_HOME/jaxmb/xla, or none where that cannot be made; a
    folder the variable names that cannot be used is an error. (Fresh processes: the cache
    is set up once per process.)"""
    probe = ("from jaxmb.cli._cache import use_compile_cache; import jax; "
             "print(use_compile_cache(None), jax.config.jax_compilation_cache_dir)")
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


def test_an_unusable_compilation_cache_is_a_one_line_error(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert main(["simulate", "double-pendulum", "--t1", "0.1", "--compile-cache", str(blocker / "cache"),
                 "--out", str(tmp_path / "r")]) == 1
    line = _error_line(capsys)
    assert "--compile-cache" in line and "a_file/cache: cannot use this folder" in line
    assert not (tmp_path / "r").exists()


OPENSIM = pathlib.Path(__file__).resolve().parent / "data" / "opensim"


def test_fit_paths_does_what_opensims_fitter_does_and_static_optimization_takes_its_paths(tmp_path, capsys):
    """`jaxmb fit-paths` around the motion OpenSim's PolynomialPathFitter was given for
    tests/data/opensim/arm26_function_paths.osim (101 frames, 10 samples per frame, orders up
    to 5): the same orders, and at the motion's frames lengths within 1 mm and moment arms
    within 1.5 mm of OpenSim's fitted paths (their samples are random: measured 0.5 and 0.7
    mm), both within 2 mm of the geometric paths. Then fitted around arm26's IK motion, its
    path set drives `static-optimization --function-paths` to OpenSim 4.6's activations
    (computed along the geometric paths) within 0.02, and `moment-arms --function-paths`
    to the fitted model's R."""
    t = np.linspace(0.0, 1.0, 101)
    q = np.stack([0.3 + 0.5 * np.sin(2 * np.pi * t), 1.0 + 0.8 * np.sin(4 * np.pi * t)], axis=1)
    labels = ("/jointset/r_shoulder/r_shoulder_elev/value", "/jointset/r_elbow/r_elbow_flex/value")
    jaxmb.io.write_storage(tmp_path / "reference.sto", jaxmb.io.MotionData(t, labels, q))
    fit = ["--samples-per-frame", "10", "--max-order", "5", "--compile-cache", "none"]
    assert main(["fit-paths", str(ARM26), str(tmp_path / "reference.sto"), "--out", str(tmp_path / "a"), *fit]) == 0
    said = capsys.readouterr().out
    assert "and arm26_path_fit.csv (6 paths, 1111 states" in said
    assert "0 path-samples left out where the geometry failed (path_status)" in said
    mine = jaxmb.load_osim(ARM26, function_paths=tmp_path / "a" / "arm26_FunctionBasedPathSet.xml")
    theirs = jaxmb.load_osim(OPENSIM / "arm26_function_paths.osim")
    geometric = jaxmb.load_osim(ARM26)
    assert [m.path.length_function.order for m in mine.muscles] == \
        [m.path.length_function.order for m in theirs.muscles]
    (Lm, Rm), (Lt, Rt), (Lg, _) = (jax.vmap(lambda x, m=m: jaxmb.muscle_lengths_and_moment_arms(m, x))(q)
                                   for m in (mine, theirs, geometric))
    assert float(np.abs(Lm - Lt).max()) < 1e-3 and float(np.abs(Rm - Rt).max()) < 1.5e-3
    assert float(np.abs(Lm - Lg).max()) < 2e-3 and float(np.abs(Lt - Lg).max()) < 2e-3
    sampled = jaxmb.io.read_storage(tmp_path / "a" / "arm26_coordinate_values_sampled.sto")
    np.testing.assert_allclose(sampled.values.reshape(101, 11, 2)[:, 0], q, rtol=0, atol=1e-15)
    assert np.all(np.diff(sampled.time) > 0)
    rows = (tmp_path / "a" / "arm26_path_fit.csv").read_text().splitlines()
    assert rows[0].startswith("path,order,samples,outliers,length_rms_m") and len(rows) == 7
    assert rows[1].split(",")[:4] == ["TRIlong", "5", "1111", "0"]

    motion = OPENSIM / "motion" / "arm26_InverseKinematics.mot"
    assert main(["fit-paths", str(ARM26), str(motion), "--out", str(tmp_path / "b"), *fit,
                 "--coordinate-bounds", "r_shoulder_elev=-5,2"]) == 0
    frames = jaxmb.io.coordinates_from_motion(mine, jaxmb.io.read_storage(motion))
    around = jaxmb.io.read_storage(tmp_path / "b" / "arm26_coordinate_values_sampled.sto").values.reshape(121, 11, 2)
    offsets = np.degrees(around[:, 1:] - frames[:, None])
    lo, hi = np.degrees(np.asarray(mine.q_lower)), np.degrees(np.asarray(mine.q_upper))
    inside = np.all((np.degrees(around[:, 1:]) > lo + 1e-9) & (np.degrees(around[:, 1:]) < hi - 1e-9), axis=2)
    assert -5 <= offsets[..., 0].min() < -4.5 and 1.5 < offsets[..., 0].max() <= 2   # --coordinate-bounds, degrees
    assert offsets[..., 1][inside].min() < -9 and offsets[..., 1][inside].max() > 9   # --bounds' default, 10 degrees
    path_set = str(tmp_path / "b" / "arm26_FunctionBasedPathSet.xml")
    assert main(["static-optimization", "--setup", str(OPENSIM / "motion" / "arm26_Setup_StaticOptimization.xml"),
                 "--out", str(tmp_path / "so"), "--function-paths", path_set, "--compile-cache", "none"]) == 0
    written = jaxmb.io.read_storage(tmp_path / "so" / "arm26_StaticOptimization_activation.sto")
    ref = jaxmb.io.read_storage(OPENSIM / "motion" / "arm26_StaticOptimization_activation.sto")
    assert written.labels == ref.labels
    np.testing.assert_allclose(written.values, ref.values, rtol=0, atol=0.02)
    assert main(["moment-arms", str(ARM26), "--coordinate", "r_elbow_flex", "--out", str(tmp_path / "ma"), "--n", "5",
                 "--function-paths", path_set, "--compile-cache", "none"]) == 0
    table = np.loadtxt(tmp_path / "ma" / "moment_arms_r_elbow_flex.csv", delimiter=",", skiprows=1)
    fitted = jaxmb.load_osim(ARM26, function_paths=path_set)
    elbow = np.asarray(fitted.q_default)[None].repeat(5, 0)
    elbow[:, 1] = table[:, 0]
    R = jax.vmap(lambda x: jaxmb.moment_arms(fitted, x))(elbow)
    np.testing.assert_allclose(table[:, 1:], R[:, 1], rtol=1e-10, atol=1e-14)


def test_fit_paths_and_path_sets_name_missing_files(tmp_path, capsys):
    assert main(["fit-paths", str(ARM26), str(tmp_path / "none.mot"), "--out", str(tmp_path / "o"),
                 "--compile-cache", "none"]) == 1
    assert "none.mot: no such motion file" in _error_line(capsys)
    assert main(["moment-arms", str(ARM26), "--coordinate", "r_elbow_flex", "--out", str(tmp_path / "o"),
                 "--function-paths", str(tmp_path / "set.xml"), "--compile-cache", "none"]) == 1
    assert "set.xml: no such path set file" in _error_line(capsys)
    assert main(["fit-paths", str(ARM26), str(tmp_path), "--out", str(tmp_path / "o"), "--max-order", "10"]) == 2
    assert "--max-order: must be between 1 and 9, got 10" in _error_line(capsys)
    assert main(["fit-paths", str(ARM26), str(tmp_path), "--out", str(tmp_path / "o"),
                 "--coordinate-bounds", "r_elbow_flex=5,-5"]) == 2
    assert "expected NAME=LO,HI with finite LO < HI, got 'r_elbow_flex=5,-5'" in _error_line(capsys)
    motion = OPENSIM / "motion" / "arm26_InverseKinematics.mot"
    assert main(["fit-paths", str(ARM26), str(motion), "--out", str(tmp_path / "o"), "--compile-cache", "none",
                 "--coordinate-bounds", "elbow=-5,5"]) == 1
    assert "--coordinate-bounds: 'elbow' is not an independent coordinate" in _error_line(capsys)
