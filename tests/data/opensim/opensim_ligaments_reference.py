"""OpenSim 4.6 reference for the generalized forces of MoBL-ARMS's ligaments (each over
one WrapEllipsoid): at the first 8 random states of ``mobl_arms.npz`` (speeds zero), with
every force disabled but one ligament, OpenSim's ``InverseDynamicsSolver`` gives
``tau_k = bias - G - Q_k``, so ``Q_k = tau_0 - tau_k`` with ``tau_0`` for every force
disabled (as `opensim_forces_reference.py`); ``Q_k`` is carried to the independent
coordinates by the couplers' ``C = dq_full/dq_ind`` (``C^T Q``).

Run from the repository root, with MoBL-ARMS in ``../shared/models/``:

    /work/osim-venv/bin/python tests/data/opensim/opensim_ligaments_reference.py ../shared/models/MOBL_ARMS_fixed_41.osim

It writes ``tests/data/opensim/mobl_ligaments.npz``: ``names`` (the ligaments), ``q``
(8, 7) independent coordinates, ``Q`` (8, n_ligaments, 7) generalized forces (N m),
``opensim_version``.
"""
import pathlib
import sys

import numpy as np
import opensim as osim

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from opensim_reference import Reference  # noqa: E402


def main(path):
    ref = Reference(path)
    data = np.load(HERE / "mobl_arms.npz")
    forces = ref.model.getForceSet()
    names = [forces.get(i).getName() for i in range(forces.getSize())
             if forces.get(i).getConcreteClassName() == "Ligament"]
    out = []
    for n in range(8):
        q_full, c = data["random_q_full"][n], data["random_C"][n]
        zero = np.zeros_like(q_full)
        tau0 = ref.inverse_dynamics(q_full, zero, zero)
        row = []
        for name in names:
            forces.get(name).setAppliesForce(ref.dyn_state, True)
            tau = ref.inverse_dynamics(q_full, zero, zero)
            forces.get(name).setAppliesForce(ref.dyn_state, False)
            row.append(c.T @ (tau0 - tau))
        out.append(row)
    np.savez(HERE / "mobl_ligaments.npz", names=np.array(names), q=data["random_q_ind"][:8], Q=np.array(out),
             opensim_version=osim.GetVersion())


if __name__ == "__main__":
    main(sys.argv[1])
