"""Write ``gait2392_so_frames.npz``: four frames (0.5 s + 78/60 s onwards) of static
optimization's per-frame problem on gait2392's walk (OpenSim's setup
``opensim/motion/subject01_Setup_StaticOptimization.xml``: ground reactions, residual
actuators, 6 Hz low-pass), as jaxmb builds them: ``B`` (4, 23, 98), ``b`` (4, 23) and the
bounds ``lo``, ``hi`` (98,). Frames where the free variables' constraint rows are poorly
conditioned (eigenvalues of the whitened ``A_F A_Fᵀ`` down to 1e-3): a test of the optax
route's convergence without compiling gait2392. Also ``gait2392_so_frames_p3.npz``: frames 9, 16
and 66 (the same arrays), where with ``exponent=3`` the dual Newton route once failed (16, 66:
a row's variables all at bounds on the way, its Newton matrix regularised for ``p = 2``'s
curvature only) or took 86 steps (9: full steps across a reserve's ``s = 0``). Run from the
repo root (about 3 minutes):

    PYTHONPATH=$PWD python tests/data/gait2392_so_frames.py
"""

import warnings
from pathlib import Path

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
import jaxmb as mb  # noqa: E402

HERE = Path(__file__).resolve().parent
DATA = HERE / "opensim" / "motion"
FRAMES = slice(78, 82)
FRAMES_P3 = [9, 16, 66]

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    model = mb.load_osim(DATA / "subject01_simbody.osim")
motion = mb.io.read_storage(DATA / "subject01_walk1_ik.mot")
extra = mb.io.read_actuators(DATA / "gait2392_SO_Residual_Actuators.xml", model)
result = mb.static_optimization(model, motion.time, mb.io.coordinates_from_motion(model, motion), lowpass_hz=6.0,
                                time_range=(0.5, 2.0), actuators_extra=extra,
                                external_loads=mb.io.read_external_loads(DATA / "subject01_walk1_grf.xml", model))
lo = [float(m.min_control) for m in model.muscles] + [float(a.min_control) for a in extra]
hi = [float(m.max_control) for m in model.muscles] + [float(a.max_control) for a in extra]
np.savez_compressed(HERE / "gait2392_so_frames.npz", B=np.asarray(result.constraint_matrix)[FRAMES],
                    b=np.asarray(result.constraint_target)[FRAMES], lo=np.asarray(lo), hi=np.asarray(hi))
np.savez_compressed(HERE / "gait2392_so_frames_p3.npz", B=np.asarray(result.constraint_matrix)[FRAMES_P3],
                    b=np.asarray(result.constraint_target)[FRAMES_P3], lo=np.asarray(lo), hi=np.asarray(hi))
