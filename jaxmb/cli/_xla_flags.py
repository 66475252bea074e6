"""The XLA flag the ``jaxmb`` command and the benchmarks run with on CPU.

XLA's CPU fusion emitters (on by default in jaxlib 0.10) make some tree code much
slower (DESIGN.md's note on MJX) and its compiles larger: with them off, compiling
MoBL-ARMS's moment-arm sweep peaks at 1.2 GB instead of 3 GB. So the command and the
benchmarks turn them off; the library itself never sets XLA flags. jaxlib 0.11 no
longer knows the flag, and XLA aborts on an unknown flag, so it is set only where the
installed jaxlib has it: on a machine with another jax (a GPU image, say) they run
with that jax's defaults, and each benchmark JSON records the flags it ran with.

XLA reads ``XLA_FLAGS`` when JAX first starts a backend (the first computation), not
when jax is imported, so a flag set after ``import jax`` and before any computation
takes effect. This module imports nothing from jaxmb or jax, so that the test
configuration can load it by path before anything else.
"""

from __future__ import annotations

import os
import re
from importlib.metadata import PackageNotFoundError, version

FUSION_EMITTERS_OFF = "--xla_cpu_use_fusion_emitters=false"


def fusion_flag_known() -> bool:
    """Whether the installed jaxlib accepts :data:`FUSION_EMITTERS_OFF` (0.10 does, 0.11 not)."""
    try:
        release = tuple(int(n) for n in re.findall(r"\d+", version("jaxlib"))[:2])
    except PackageNotFoundError:
        return False
    return release < (0, 11)


def fusion_emitters_off(force: bool = False) -> None:
    """Put :data:`FUSION_EMITTERS_OFF` into ``XLA_FLAGS`` where jaxlib knows it: if
    ``XLA_FLAGS`` is unset (the user's own flags win), or added to them with `force`."""
    if not fusion_flag_known():
        return
    flags = os.environ.get("XLA_FLAGS")
    if flags is None:
        os.environ["XLA_FLAGS"] = FUSION_EMITTERS_OFF
    elif force and FUSION_EMITTERS_OFF not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {FUSION_EMITTERS_OFF}".strip()
