"""Test configuration: float64 everywhere (the library never switches it on itself),
and runtime type checks of jaxmb's jaxtyping annotations."""

import os
from importlib.metadata import version

# The suite is dominated by XLA compile time, not run time: a lower backend optimisation
# level compiles 2-3x faster on CPU (and the fusion-emitter trap of DESIGN.md is avoided).
# jaxlib 0.11 no longer has the fusion-emitter flag, and XLA aborts on an unknown flag.
_FLAGS = " --xla_backend_optimization_level=0"
if tuple(int(x) for x in version("jaxlib").split(".")[:2]) < (0, 11):
    _FLAGS += " --xla_cpu_use_fusion_emitters=false"
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + _FLAGS).strip()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import pathlib  # noqa: E402

import pytest  # noqa: E402

# The repository's sibling folder shared/ (as on developer machines and in CI).
SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> pathlib.Path:
    return SHARED
