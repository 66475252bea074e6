"""Test configuration: float64 everywhere (the library never switches it on itself),
and runtime type checks of jaxmb's jaxtyping annotations."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import pathlib  # noqa: E402

import pytest  # noqa: E402

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared"
if not SHARED.exists():  # CI clones the repo with shared/ beside it
    SHARED = pathlib.Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> pathlib.Path:
    return SHARED
