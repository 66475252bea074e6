"""OpenSim 4.6 reference for jaxmb's motion files and inverse dynamics (run in the OpenSim venv).

    /work/osim-venv/bin/python tests/data/opensim/motion_reference.py

Reads the inputs in ``tests/data/opensim/motion/`` (copied from opensim-models:
Tutorials/Computed_Muscle_Control and Pipelines/Gait2392_Simbody) and writes, next to them:

* ``arm26_id_unfiltered.sto``: OpenSim's InverseDynamicsTool on arm26's tutorial motion
  (``arm26_InverseKinematics.mot``), no filter, muscles excluded, time range [0, 1] (the whole motion).
* ``arm26_id_lowpass6.sto``: the same with ``lowpass_cutoff_frequency_for_coordinates=6``
  and time range [0, 1] (the tutorial's setup, ``arm26_Setup_InverseDynamics.xml``).
* ``gait2392_walk1_id.sto``: ``subject01_Setup_InverseDynamics.xml`` as it is (6 Hz,
  0.4-1.6 s, ground reactions of ``subject01_walk1_grf.xml``).
* ``opensim_reads_jaxmb.json``: what OpenSim's ``Storage`` and ``TimeSeriesTable`` read
  from ``jaxmb_written.sto`` (a file written by ``jaxmb.io.write_storage``; the test
  suite checks that jaxmb still writes it byte for byte).
"""

import json
import os
import pathlib
import shutil
import tempfile

import opensim as osim

HERE = pathlib.Path(__file__).resolve().parent / "motion"


def run_id(model, motion, out_name, *, lowpass=-1.0, time_range=None, loads=None):
    with tempfile.TemporaryDirectory() as tmp:
        for f in (model, motion) + ((loads, "subject01_walk1_grf.mot") if loads else ()):
            shutil.copy(HERE / f, tmp)
        tool = osim.InverseDynamicsTool()
        tool.setName("jaxmb_reference")
        tool.setModelFileName(os.path.join(tmp, model))
        tool.setCoordinatesFileName(os.path.join(tmp, motion))
        tool.setLowpassCutoffFrequency(lowpass)
        excluded = osim.ArrayStr()
        excluded.append("Muscles")
        tool.setExcludedForces(excluded)
        if time_range is not None:
            tool.setStartTime(time_range[0])
            tool.setEndTime(time_range[1])
        if loads:
            tool.setExternalLoadsFileName(os.path.join(tmp, loads))
        tool.setResultsDir(tmp)
        tool.setOutputGenForceFileName(out_name)
        tool.run()
        shutil.copy(os.path.join(tmp, out_name), HERE / out_name)


def opensim_reads(path):
    sto = osim.Storage(str(path))
    labels = list(sto.getColumnLabels().get(i) for i in range(sto.getColumnLabels().getSize()))
    rows = []
    for i in range(sto.getSize()):
        vec = sto.getStateVector(i)
        data = vec.getData()
        rows.append([vec.getTime()] + [data.get(j) for j in range(data.getSize())])
    table = osim.TimeSeriesTable(str(path))
    return {"opensim_version": osim.GetVersionAndDate(), "storage_labels": labels,
            "storage_in_degrees": bool(sto.isInDegrees()), "storage_rows": rows,
            "table_labels": list(table.getColumnLabels()),
            "table_times": list(table.getIndependentColumn()),
            "table_in_degrees": table.getTableMetaDataString("inDegrees")}


if __name__ == "__main__":
    run_id("arm26.osim", "arm26_InverseKinematics.mot", "arm26_id_unfiltered.sto", time_range=(0.0, 1.0))
    run_id("arm26.osim", "arm26_InverseKinematics.mot", "arm26_id_lowpass6.sto", lowpass=6.0, time_range=(0.0, 1.0))
    run_id("subject01_simbody.osim", "subject01_walk1_ik.mot", "gait2392_walk1_id.sto", lowpass=6.0,
           time_range=(0.4, 1.6), loads="subject01_walk1_grf.xml")
    written = HERE / "jaxmb_written.sto"
    if written.exists():
        (HERE / "opensim_reads_jaxmb.json").write_text(json.dumps(opensim_reads(written), indent=1) + "\n")
