"""The shoulder study's outputs: the muscle force-sharing hook (Fig. 21), the figures
(Ehsani 2016, Fig. 19-21 analogues, matplotlib) and a short markdown report.

matplotlib is imported only by the plotting functions.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import numpy as np

from ._shoulder import SHOULDER_COORDINATES, SHOULDER_MUSCLES, ShoulderTracking

# A force-sharing function: ``share(model, ts, q, qd, tau) -> forces``, with `model` a
# model with muscles, ``ts`` (T,) s, ``q``, ``qd``, ``tau`` (T, nq) and ``forces``
# (T, n_muscles) N in the order of ``model.muscle_names`` (static optimization,
# Ehsani 2016: the sum of squared activations minimised subject to ``R F = tau``
# and the musculotendon equations).
ForceSharing = Callable[..., np.ndarray]


def shoulder_muscle_forces(model, tracking: ShoulderTracking, share: ForceSharing,
                           muscles: tuple[str, ...] = SHOULDER_MUSCLES) -> np.ndarray:
    """The forces of the study's 14 musculotendon units (Ehsani 2016, Fig. 21) from the
    tracking's torques, by a force-sharing function.

    **Arguments:**

    - `model`: the shoulder model with its muscles (``shoulder_model`` of a model read with ``muscles=True``).
    - `tracking`: `track_shoulder`'s result (its ``ts``, ``q``, ``qd``, ``tau``).
    - `share`: ``share(model, ts, q, qd, tau) -> (T, n_muscles)`` forces in N in the
      order of ``model.muscle_names``, from ``ts`` (T,) s and ``q``, ``qd``, ``tau``
      (T, 3): a force-sharing method such as static optimization (Ehsani 2016 minimises
      the sum of squared activations subject to ``R F = tau`` and the musculotendon
      equations).
    - `muscles`: the muscles to return (default `SHOULDER_MUSCLES`).

    **Returns:**

    (T, len(muscles)) forces, N.

    **Raises:**

    `ValueError` if a muscle is not in the model or `share` returns another shape.
    """
    names = tuple(model.muscle_names)
    missing = [m for m in muscles if m not in names]
    if missing:
        raise ValueError(f"shoulder_muscle_forces: model {model.name!r} has no muscles {missing}; read it with "
                         "read_osim(path, muscles=True, locked=locked_coordinates()) and shoulder_model.")
    forces = np.asarray(share(model, tracking.ts, tracking.q, tracking.qd, tracking.tau))
    expected = (tracking.ts.shape[0], len(names))
    if forces.shape != expected:
        raise ValueError(f"shoulder_muscle_forces: the force-sharing function returned shape {forces.shape}; "
                         f"expected (frames, muscles) = {expected}.")
    return forces[:, [names.index(m) for m in muscles]]


def _figure(nrows=1, ncols=1, **kw):
    import matplotlib.pyplot as plt

    return plt, *plt.subplots(nrows, ncols, **kw)


def plot_elevation(tracking: ShoulderTracking, path=None):
    """Fig. 19 analogue (Ehsani 2016): the desired and achieved elevation and the
    tracking error of the three coordinates.

    **Arguments:**

    - `tracking`: `track_shoulder`'s result.
    - `path`: where to save the figure (PNG, SVG, ...; default: not saved).

    **Returns:**

    The matplotlib figure (closed once saved).
    """
    plt, fig, ax = _figure(1, 2, figsize=(10, 3.5))
    ts = np.asarray(tracking.ts)
    ax[0].plot(ts, np.rad2deg(np.asarray(tracking.q_ref[:, 1])), lw=3, label="desired")
    ax[0].plot(ts, np.rad2deg(np.asarray(tracking.q[:, 1])), "k:", label="achieved")
    ax[0].set(xlabel="time (s)", ylabel="elevation angle (deg)", title="Desired elevation (Fig. 19)")
    ax[0].legend()
    err = np.abs(np.asarray(tracking.q - tracking.q_ref))
    for k, name in enumerate(SHOULDER_COORDINATES):
        ax[1].semilogy(ts, np.maximum(err[:, k], 1e-17), label=name)
    ax[1].set(xlabel="time (s)", ylabel="|q - q_des| (rad)", title="Tracking error")
    ax[1].legend()
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig


def plot_torques(tracking: ShoulderTracking, path=None):
    """Fig. 20 analogue (Ehsani 2016): the required generalized forces of the three coordinates.

    **Arguments:**

    - `tracking`: `track_shoulder`'s result (its `tau`, N m).
    - `path`: where to save the figure (default: not saved).

    **Returns:**

    The matplotlib figure (closed once saved).
    """
    plt, fig, ax = _figure(figsize=(6, 3.5))
    ts = np.asarray(tracking.ts)
    for k, name in enumerate(SHOULDER_COORDINATES):
        ax.plot(ts, np.asarray(tracking.tau[:, k]), label=name)
    ax.set(xlabel="time (s)", ylabel="torque (N m)", title="Required torques (Fig. 20)")
    ax.legend()
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig


def plot_muscle_forces(ts, forces, names=SHOULDER_MUSCLES, path=None):
    """Fig. 21 analogue (Ehsani 2016): the forces of the musculotendon units, one panel each.

    **Arguments:**

    - `ts`: (T,) times, s.
    - `forces`: (T, n) forces, N, n ≤ 14.
    - `names`: the n muscles' names (default `SHOULDER_MUSCLES`).
    - `path`: where to save the figure (default: not saved).

    **Returns:**

    The matplotlib figure (closed once saved).
    """
    forces = np.asarray(forces)
    plt, fig, axes = _figure(2, 7, figsize=(16, 5), sharex=True)
    for k, ax in enumerate(axes.ravel()):
        if k < forces.shape[1]:
            ax.plot(np.asarray(ts), forces[:, k])
            ax.set_title(names[k], fontsize=9)
        else:
            ax.axis("off")
    fig.supxlabel("time (s)")
    fig.supylabel("force (N)")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig


def report_markdown(tracking: ShoulderTracking, *, dae: ShoulderTracking | None = None,
                    timings: dict | None = None, figures: dict | None = None,
                    forces: np.ndarray | None = None) -> str:
    """A short markdown report of the study: tracking precision against the
    dissertation's, the torques' ranges, the DAE comparison and the figures.

    **Arguments:**

    - `tracking`: `track_shoulder`'s result.
    - `dae`: `track_shoulder_dae`'s result for the same motion, if run.
    - `timings`: ``{what: seconds}`` to list (e.g. each route's run time).
    - `figures`: ``{caption: file name}``.
    - `forces`: (T, 14) muscle forces (Fig. 21), if a force-sharing function was given.

    **Returns:**

    The markdown text.
    """
    err = np.abs(np.asarray(tracking.q - tracking.q_ref)).max(axis=0)
    derr = np.abs(np.asarray(tracking.qd - tracking.qd_ref)).max(axis=0)
    tau = np.asarray(tracking.tau)
    lines = ["# Shoulder study (Ehsani 2016, section 4-4 C)", "",
             "MoBL-ARMS's shoulder (Saul et al. 2015): the clavicle and scapula follow the elevation "
             "through the model's coupled coordinates (embedded joint functions), the elbow, forearm and "
             "wrist locked. Computed-torque tracking, Eq. 200-201, K = diag(100, 100, 1000); plane of "
             "elevation 90 degrees, axial rotation -30 degrees.", "",
             f"{len(tracking.ts)} frames over {float(tracking.ts[-1]):g} s, {int(tracking.num_steps)} "
             "integrator steps.", "",
             "| coordinate | max abs(q - q_des) (rad) | max abs(q' - q'_des) (rad/s) | torque min (N m) | "
             "torque max (N m) |", "|---|---|---|---|---|"]
    for k, name in enumerate(SHOULDER_COORDINATES):
        lines.append(f"| {name} | {err[k]:.3g} | {derr[k]:.3g} | {tau[:, k].min():.4g} | {tau[:, k].max():.4g} |")
    ok = err[0] < 1e-12 and err[2] < 1e-12 and err[1] < 2e-4
    lines += ["", "The dissertation reports the first and third coordinates to 16 significant figures and "
                  f"the elevation within 2e-4 rad: {'met' if ok else 'NOT met'} here."]
    if dae is not None:
        lines += ["", "## Embedded ODE against the DAE", "",
                  f"The same tracking with the rhythm as 11 constraints of an index-1 DAE in 14 joint "
                  f"variables: {int(dae.num_steps)} steps (embedded: {int(tracking.num_steps)}), largest "
                  f"elevation difference {np.abs(np.asarray(dae.q - tracking.q)).max():.3g} rad, largest "
                  f"torque difference {np.abs(np.asarray(dae.tau) - tau).max():.3g} N m, constraint drift "
                  f"{float(np.max(np.asarray(dae.drift))):.3g} rad. Ehsani reports the embedded route more "
                  "than 3 times faster."]
    if timings:
        lines += ["", "| step | seconds |", "|---|---|"] + [f"| {k} | {v:.3g} |" for k, v in timings.items()]
        if "embedded ODE run" in timings and "DAE run" in timings:
            lines += ["", f"DAE / embedded run time: {timings['DAE run'] / timings['embedded ODE run']:.2f}x "
                          "(one run each, after compilation; `benchmarks/bench_closed_chains.py --sections shoulder` "
                          "compares them at equal accuracy)."]
    lines += ["", "## Muscle forces (Fig. 21)", ""]
    if forces is None:
        lines.append("Not computed: no force-sharing function was given (`jaxmb shoulder-study --muscles`, or "
                     "`jaxmb.studies.shoulder_muscle_forces` with `jaxmb.studies.compliant_static_optimization`).")
    else:
        forces = np.asarray(forces)
        lines += ["| muscle | peak force (N) |", "|---|---|"]
        lines += [f"| {m} | {forces[:, k].max():.4g} |" for k, m in enumerate(SHOULDER_MUSCLES)]
    if figures:
        lines += ["", "## Figures", ""] + [f"![{cap}]({name})" for cap, name in figures.items()]
    return "\n".join(lines) + "\n"


def write_csv(tracking: ShoulderTracking, path) -> pathlib.Path:
    """Write the frames as CSV: time, q, q_des and tau per coordinate (units in the header).

    **Arguments:**

    - `tracking`: `track_shoulder`'s result.
    - `path`: the file to write.

    **Returns:**

    The path written.
    """
    cols = [np.asarray(tracking.ts)[:, None], np.asarray(tracking.q), np.asarray(tracking.q_ref),
            np.asarray(tracking.tau)]
    head = ["time_s"] + [f"{n}_rad" for n in SHOULDER_COORDINATES] + [f"{n}_des_rad" for n in SHOULDER_COORDINATES] \
        + [f"{n}_torque_Nm" for n in SHOULDER_COORDINATES]
    path = pathlib.Path(path)
    np.savetxt(path, np.hstack(cols), delimiter=",", header=",".join(head), comments="", fmt="%.17g")
    return path
