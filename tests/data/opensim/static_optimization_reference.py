"""OpenSim 4.6 reference for jaxmb's static optimization (run in the OpenSim venv).

    /work/osim-venv/bin/python tests/data/opensim/static_optimization_reference.py

Runs OpenSim's AnalyzeTool with its StaticOptimization analysis on the setup files in
``tests/data/opensim/motion/`` as they are:

* ``arm26_Setup_StaticOptimization.xml``: arm26's tutorial motion
  (``arm26_InverseKinematics.mot``, opensim-models Tutorials/Computed_Muscle_Control),
  6 Hz low-pass, 0-1 s, the model's 6 muscles, exponent 2;
* ``subject01_Setup_StaticOptimization.xml``: gait2392's walk
  (``subject01_walk1_ik.mot``, Pipelines/Gait2392_Simbody) with its ground reactions
  (``subject01_walk1_grf.xml``) and residuals (``gait2392_SO_Residual_Actuators.xml``,
  the pipeline's file without its ``<defaults>``), 6 Hz, 0.5-2.0 s.

and copies the results next to them as ``<name>_StaticOptimization_activation.sto`` and
``<name>_StaticOptimization_force.sto``. The process CPU time of each run (the whole
tool: model, states, analysis) is written to ``static_optimization_timing.json``.
"""

import json
import os
import pathlib
import platform
import shutil
import tempfile
import time

import opensim as osim

HERE = pathlib.Path(__file__).resolve().parent / "motion"
INPUTS = {"arm26": ["arm26.osim", "arm26_InverseKinematics.mot"],
          "subject01_walk1": ["subject01_simbody.osim", "subject01_walk1_ik.mot", "subject01_walk1_grf.xml",
                              "subject01_walk1_grf.mot", "gait2392_SO_Residual_Actuators.xml"]}


def run(setup, name):
    with tempfile.TemporaryDirectory() as tmp:
        for f in INPUTS[name] + [setup]:
            shutil.copy(HERE / f, tmp)
        tool = osim.AnalyzeTool(os.path.join(tmp, setup))
        cpu, wall = time.process_time(), time.perf_counter()
        tool.run()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        results = os.path.join(tmp, "ResultsStaticOptimization")
        for kind in ("activation", "force"):
            out = f"{name}_StaticOptimization_{kind}.sto"
            shutil.copy(os.path.join(results, out), HERE / out)
        return {"cpu_seconds": cpu, "wall_seconds": wall}


if __name__ == "__main__":
    timing = {"opensim_version": osim.GetVersionAndDate(), "machine": platform.processor() or platform.machine(),
              "load_average": os.getloadavg()[0]}
    timing["arm26"] = run("arm26_Setup_StaticOptimization.xml", "arm26")
    timing["subject01_walk1"] = run("subject01_Setup_StaticOptimization.xml", "subject01_walk1")
    (HERE / "static_optimization_timing.json").write_text(json.dumps(timing, indent=1) + "\n")
