#!/usr/bin/env python
"""How much round-off the ECRB torus iterate amplifies at MoBL-ARMS sweep state 966.

tests/test_muscle_parity.py compares jaxmb's central difference of the ECRB length
with OpenSim's at this state. The length follows OpenSim's torus iterate, which
amplifies round-off, and a difference quotient at h = 1e-6 amplifies it again. This
script evaluates the length and the central difference twice in one process: with
the pose products written out (`jaxmb._spatial.small_matmul`, the library's form)
and with plain `@` (the form before), and prints the differences. The test's
tolerance for the FD-vs-FD check (5e-7 m) is set from them.

Run: `.venv/bin/python scripts/check_ecrb_fd_noise.py` (a few minutes of compilation).
"""

import pathlib

import jax

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmb._dynamics as _dynamics  # noqa: E402
import jaxmb._kinematics as _kinematics  # noqa: E402
import jaxmb._model as _model  # noqa: E402
from jaxmb import _muscles as M  # noqa: E402
from jaxmb import io  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
STATE = 966


def evaluate(model, d):
    k, c, h = list(d["muscle_names"]).index("ECRB"), int(d["sweep_coordinate"][STATE]), float(d["fd_step"])
    q = jnp.asarray(d["sweep_q_ind"][STATE])
    e = jnp.zeros_like(q).at[c].set(1.0)
    length = jax.jit(lambda x: M.muscle_lengths(model, x)[0])
    fd = -(length(q + h * e) - length(q - h * e)) / (2 * h)
    return float(length(q)), float(fd), float(d["sweep_moment_arms_fd"][STATE, k]), h


def main():
    d = np.load(ROOT / "tests" / "data" / "opensim" / "mobl_arms.npz")
    model = io.load_osim(ROOT.parent / "shared" / "models" / "MOBL_ARMS_fixed_41.osim")
    model = eqx.tree_at(lambda m: m.muscles, model, tuple(m for m in model.muscles if m.name == "ECRB"))
    fused = evaluate(model, d)
    plain_matmul = lambda a, b: a @ b  # noqa: E731
    plain_matvec = lambda a, v: jnp.einsum("...ij,...j->...i", a, v)  # noqa: E731
    for mod in (_kinematics, _dynamics, _model):
        if hasattr(mod, "small_matmul"):
            mod.small_matmul = plain_matmul
        if hasattr(mod, "small_matvec"):
            mod.small_matvec = plain_matvec
    plain = evaluate(model, d)
    for name, (length, fd, osim_fd, h) in (("written-out products", fused), ("plain @", plain)):
        print(f"{name:22s} L = {length:.17g} m  FD(h={h:g}) = {fd:.12e}  FD - OpenSim FD = {fd - osim_fd:.2e} m")
    print(f"length difference between the two orders: {abs(fused[0] - plain[0]):.1e} m; "
          f"FD difference: {abs(fused[1] - plain[1]):.1e} m")


if __name__ == "__main__":
    main()
