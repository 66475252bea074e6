"""Result codes of jaxmb's iterative solves, in the style of ``optimistix.RESULTS``.

A solve that can fail returns one of these as an array (so it survives ``jit`` and
``vmap``) and takes a ``throw`` flag: ``throw=True`` raises through
``eqx.error_if`` with the message below, ``throw=False`` leaves the code for the
caller to inspect, batch member by batch member.

```python
sol = mb.simulate(model, q0, qd0, t1=1.0, throw=False)
ok = sol.result == mb.RESULTS.successful
```
"""

import equinox as eqx


class RESULTS(eqx.Enumeration):
    """What a loop-closure solve, a muscle-path evaluation or a simulation ended with.

    `RESULTS[code]` is the message; `code == RESULTS.successful` the test.

    **Members:**

    - `successful`: the solve or the run finished.
    - `loop_not_converged`: Newton's method found no assembly of a loop closure
      (`LoopClosure.solve`).
    - `loop_singular`: ``∂g/∂f`` of a loop is rank-deficient at ``q``.
    - `loop_wrong_branch`: a loop solve converged on another assembly branch.
    - `nonfinite_state`: ``q``, ``q'`` or the applied forces became NaN or inf.
    - `singular_mass_matrix`: ``M(q)`` is singular or not positive definite.
    - `max_steps_reached`: the integrator ran out of steps before ``t1``.
    - `static_optimization_failed`: a frame of static optimization has no feasible solution
      (or did not converge).
    - `solver_failed`: the step size collapsed or an implicit stage diverged.
    - `identification_failed`: a parameter fit did not converge (`identify`).
    - `path_passes_not_converged`, `path_wrap_not_converged`, `path_implausible`: a muscle's
      path at a state failed (`PathStatus.result`, one code per muscle).
    """

    successful = ""
    loop_not_converged = (
        "a loop-closure solve did not converge: Newton's method found no assembly near the "
        "initial guess, or q is outside the mechanism's range of motion"
    )
    loop_singular = (
        "a loop closure is at a singular configuration: dg/df is rank-deficient, so the "
        "dependent joint variables are not smooth functions of q here"
    )
    loop_wrong_branch = (
        "a loop-closure solve converged to another assembly branch than the chosen one; give "
        "the LoopClosure a guess(q, params) on the chosen branch, shorter continuation steps or "
        "a q_ref nearer the motion"
    )
    nonfinite_state = (
        "the state (q, qd) or the applied forces became non-finite (NaN or inf); check the "
        "initial state, the applied forces and the model's parameters"
    )
    singular_mass_matrix = (
        "the mass matrix is singular or not positive definite at this state: a coordinate "
        "moves no mass (a massless end body, zero inertia about a joint axis, or a coordinate "
        "that drives nothing)"
    )
    max_steps_reached = (
        "the integrator reached max_steps before t1; raise max_steps, loosen rtol/atol, or check "
        "for a stiff or singular system"
    )
    solver_failed = "the integrator failed (step size collapsed or the implicit stage solve diverged)"
    identification_failed = (
        "the parameter fit did not reach its tolerance within max_steps, ended above its initial loss "
        "(an optax step size too large), or its loss is not finite: start nearer the measurements, fit "
        "fewer parameters at once, lower the step size, raise max_steps, or loosen rtol/atol"
    )
    static_optimization_failed = (
        "static optimization found no activations and controls within their bounds that balance "
        "the generalized forces at this frame (or did not converge in max_steps): the model is too "
        "weak here; add reserve actuators, widen their bounds, or check the motion"
    )
    path_passes_not_converged = (
        "OpenSim's passes over this muscle's wraps did not meet their 0.5 mm criterion within 8 "
        "passes: its length depends on the order of the wraps here; check the wraps' ranges and "
        "quadrants, or leave this state out"
    )
    path_wrap_not_converged = (
        "a wrap of this muscle ended at tangent points that do not solve its tangency equations "
        "(its iteration stopped at its cap or converged elsewhere); the length here is not the "
        "wrapped path's; leave this state out or check the wrap object's size and placement"
    )
    path_implausible = (
        "this muscle's length here is one no wrapped path can have (not finite, shorter than the "
        "straight path through its points, or a wrap lengthening its segment by more than two turns "
        "and two diameters about its object): the wrap geometry failed, in OpenSim too; leave this "
        "state out (fit_function_paths does) or check the wrap objects"
    )
