"""Test configuration: float64 everywhere (the library never switches it on itself),
and runtime type checks of jaxmb's jaxtyping annotations."""

import importlib.util
import os
import pathlib

# The suite is dominated by XLA compile time, not run time: a lower backend optimisation
# level compiles 2-3x faster on CPU (and the fusion-emitter trap of DESIGN.md is avoided,
# where the installed jaxlib has that flag: jaxmb/cli/_xla_flags.py).
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()
_spec = importlib.util.spec_from_file_location(
    "_xla_flags", pathlib.Path(__file__).resolve().parents[1] / "jaxmb" / "cli" / "_xla_flags.py")
_xla_flags = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_xla_flags)
_xla_flags.fusion_emitters_off(force=True)

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
# Tests as specifications: no implicit rank promotion ((3,) * (3, 3) is an error, broadcast
# explicitly) and no implicit dtype promotion between array dtypes (weak Python scalars
# still combine with arrays). The library must pass under these and under JAX's defaults.
jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_numpy_dtype_promotion", "strict")

import pytest  # noqa: E402

# The repository's sibling folder shared/ (as on developer machines and in CI).
SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared"


# What a command run in this process (`jaxmb.cli.main`) sets for itself: its persistent
# compilation cache (`jaxmb.cli._cache.use_compile_cache`). Left on, every later compile of
# the worker would be written to and read from the user's cache folder, shared with the
# other worker (a worker once died reading an entry there, in CI).
_PROCESS_SETTINGS = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
                     "jax_persistent_cache_min_entry_size_bytes")


@pytest.fixture(autouse=True)
def _settings_restored_after_each_test():
    before = {name: getattr(jax.config, name) for name in _PROCESS_SETTINGS}
    yield
    for name, value in before.items():
        if getattr(jax.config, name) != value:
            jax.config.update(name, value)


@pytest.fixture(scope="session")
def shared_dir() -> pathlib.Path:
    return SHARED


# The files whose tests compile the most, heaviest first (CI's `--durations`, 2026-11-28).
# pytest-xdist (`--dist loadfile --no-loadscope-reorder`, pyproject.toml) hands a worker the
# next file in collection order when it runs out, so starting with these balances the two
# workers; by default xdist orders files by their number of tests, which left the heaviest
# for last. A stale list costs balance, never correctness.
HEAVIEST_FILES = (
    "test_muscles.py", "test_dynamics.py", "test_muscle_parity.py", "test_frozen_path.py",
    "test_muscle_driven.py", "test_identify.py", "test_static_optimization_compliant.py",
    "test_ellipsoid.py", "test_closed_models.py", "test_converged_wraps.py", "test_readme.py",
    "test_static_optimization.py", "test_constraints.py", "test_benchmarks.py",
)


def pytest_collection_modifyitems(config, items):
    """The heaviest files first (`HEAVIEST_FILES`; the order within a file is kept). Tests
    marked `slow` (whole-model OpenSim parity runs, minutes each) are deselected unless a
    marker expression is given: `pytest -m slow` runs them alone, `pytest -m "slow or not
    slow"` runs everything."""
    rank = {name: k for k, name in enumerate(HEAVIEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files stay contiguous
    if config.option.markexpr:
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("slow") is None]
