"""OpenSim 4.6 reference for the generalized force of a model's muscles at given states and
activations (tests/test_muscle_forces_parity.py): what OpenSim's forward dynamics applies.

At the first 8 random states of the model's reference file (``arm26.npz``,
``mobl_arms.npz``: coordinates and speeds that meet the couplers), with activations drawn
uniformly in [0.05, 1] (seed 0), every muscle's fibre is put in OpenSim's static
equilibrium (``Model.equilibrateMuscles``), then, with every force disabled but the muscles,
OpenSim's ``InverseDynamicsSolver`` at zero accelerations gives ``tau = bias - G - Q``, so
``Q = tau_0 - tau`` with ``tau_0`` for every force disabled (as
`opensim_ligaments_reference.py`); ``Q`` is carried to the independent coordinates by the
couplers' ``C = dq_full/dq_ind`` (``C^T Q``). The same for each muscle alone (``Q_each``).

Run from the repository root, with the models in ``../shared/models/``:

    /work/osim-venv/bin/python tests/data/opensim/opensim_muscle_forces_reference.py ../shared/models/arm26.osim arm26
    /work/osim-venv/bin/python tests/data/opensim/opensim_muscle_forces_reference.py ../shared/models/MOBL_ARMS_fixed_41.osim mobl_arms

It writes ``tests/data/opensim/<name>_muscle_forces.npz``: ``names`` (the muscles),
``q``, ``qd`` (8, n_ind) independent coordinates and speeds, ``activations`` (8, n_muscles),
``lengths``, ``lengthening_speeds``, ``tendon_forces`` (8, n_muscles; m, m/s, N), ``Q``
(8, n_ind) and ``Q_each`` (8, n_muscles, n_ind) generalized forces (N m),
``opensim_version``.
"""
import pathlib
import sys

import numpy as np
import opensim as osim

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from opensim_reference import Reference  # noqa: E402

N_STATES = 8


def main(path, name):
    ref = Reference(path)
    data = np.load(HERE / f"{name}.npz")
    forces = ref.model.getForceSet()
    muscles = ref.muscles
    activations = np.random.default_rng(0).uniform(0.05, 1.0, size=(N_STATES, len(muscles)))
    st = ref.dyn_state
    out = {k: [] for k in ("lengths", "lengthening_speeds", "tendon_forces", "Q", "Q_each")}
    zero = np.zeros(len(ref.coords))
    for n in range(N_STATES):
        q_full, qd_full, c = data["random_q_full"][n], data["random_qd_full"][n], data["random_C"][n]
        tau0 = ref.inverse_dynamics(q_full, qd_full, zero)
        for m in muscles:
            forces.get(m.getName()).setAppliesForce(st, True)
        ref.set_q(st, q_full, qd_full)
        for m, a in zip(muscles, activations[n]):
            m.setActivation(st, float(a))
        ref.model.equilibrateMuscles(st)
        ref.model.realizeDynamics(st)
        out["lengths"].append([m.getLength(st) for m in muscles])
        out["lengthening_speeds"].append([m.getLengtheningSpeed(st) for m in muscles])
        out["tendon_forces"].append([m.getTendonForce(st) for m in muscles])
        # InverseDynamicsSolver at the state as it is (q, q', fibre lengths, activations).
        udot = osim.Vector(ref.nu, 0.0)
        tau = np.asarray([ref.id_solver.solve(st, udot).get(i) for i in range(ref.nu)])[ref.u_index]
        out["Q"].append(c.T @ (tau0 - tau))
        each = []
        for m in muscles:
            for other in muscles:
                forces.get(other.getName()).setAppliesForce(st, other.getName() == m.getName())
            ref.model.realizeDynamics(st)
            tau = np.asarray([ref.id_solver.solve(st, udot).get(i) for i in range(ref.nu)])[ref.u_index]
            each.append(c.T @ (tau0 - tau))
        out["Q_each"].append(each)
        for m in muscles:
            forces.get(m.getName()).setAppliesForce(st, False)
    np.savez(HERE / f"{name}_muscle_forces.npz", names=np.array(ref.muscle_names), q=data["random_q_ind"][:N_STATES],
             qd=data["random_qd_ind"][:N_STATES], activations=activations,
             **{k: np.array(v) for k, v in out.items()}, opensim_version=osim.GetVersion())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
