"""Build-time checks of a model's numbers and structure, in NumPy (no compilation):
bodies' inertial parameters (finite, positive mass, symmetric positive semi-definite
inertia obeying the triangle inequality), coordinate ranges, and the structural causes
of a singular mass matrix. Each check is skipped where the parameters are traced (a
model built under `jit` or `vmap`)."""

import jax
import jax.numpy as jnp
import numpy as np

from ._errors import ModelError
from ._functions import JaxFunction


def _round_off(values: np.ndarray, floor: float) -> float:
    """A relative tolerance for a build-time check on `values`: `floor`, or what their
    dtype resolves where that is coarser (a float32 model's rotations are orthonormal
    only to float32 round-off)."""
    return max(floor, 100.0 * float(np.finfo(values.dtype).eps))


def _concrete(*arrays) -> list[np.ndarray] | None:
    """NumPy copies of the arrays, or None when any is a tracer (checks then skip)."""
    try:
        return [np.asarray(a) for a in arrays]
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None

def _validate_inertial(name, mass, com, inertia, *, massless):
    if not np.all(np.isfinite(mass)) or not np.all(np.isfinite(com)) or not np.all(np.isfinite(inertia)):
        raise ModelError(f"Body {name!r}: mass, com and inertia must be finite.")
    if massless:
        if mass != 0.0 or np.any(inertia != 0.0):
            raise ModelError(
                f"Body {name!r} is declared massless but has mass {float(mass)} or non-zero "
                "inertia; drop `massless=True` or zero them."
            )
        return
    if not mass > 0.0:
        raise ModelError(
            f"Body {name!r} has non-positive mass {float(mass)} kg; give it a positive mass, "
            "or build it with Body.virtual(name) if it is a massless link of a multi-DOF joint."
        )
    scale = max(float(np.max(np.abs(inertia))), 1e-300)
    if np.max(np.abs(inertia - inertia.T)) > _round_off(inertia, 1e-10) * scale:
        raise ModelError(f"Body {name!r}: inertia tensor is not symmetric:\n{inertia}")
    moments = np.linalg.eigvalsh(0.5 * (inertia + inertia.T))
    tol = _round_off(inertia, 1e-9) * scale
    if moments[0] < -tol:
        raise ModelError(
            f"Body {name!r}: inertia tensor is not positive semi-definite (principal moments "
            f"{moments}); check signs of the products of inertia."
        )
    if moments[0] + moments[1] < moments[2] - tol:
        raise ModelError(
            f"Body {name!r}: principal moments {moments} violate the triangle inequality "
            "I1 + I2 >= I3, so no mass distribution has this inertia."
        )

def _check_ranges(model: "Model"):
    values = _concrete(model.q_default, model.q_lower, model.q_upper)
    if values is None:
        return
    default, lower, upper = values
    for k, name in enumerate(model.coordinate_names):
        if np.isnan(lower[k]) or np.isnan(upper[k]) or not lower[k] <= upper[k]:
            raise ModelError(
                f"Model {model.name!r}: coordinate {name!r} has range ({lower[k]}, {upper[k]}); "
                "give (lower, upper) with lower <= upper."
            )
        if not np.isfinite(default[k]):
            raise ModelError(f"Model {model.name!r}: coordinate {name!r} has non-finite default {default[k]}.")


def _np_rotation(axis, angle):
    k = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
    return np.eye(3) + np.sin(angle) * k + (1.0 - np.cos(angle)) * (k @ k)


def is_kinematic(model: "Model") -> bool:
    """Whether no body of `model` has mass: a kinematic model, such as OpenSim's wrist model
    (Gonzalez et al. 1997), built for muscle geometry and moment arms. Its kinematics,
    muscle paths, mass matrix (zero) and inverse dynamics are defined; its forward
    dynamics are not (`require_mass`). False when the masses are traced."""
    for body in model.bodies:  # one conversion for most models: the first body has mass
        mass = _concrete(body.mass)
        if mass is None or float(mass[0]) > 0.0:
            return False
    return True


def require_mass(model: "Model", caller: str):
    """Raise `ModelError` where `model` is kinematic (`is_kinematic`) and `caller` needs
    ``M(q)⁻¹``: its mass matrix is zero, so accelerations are undefined."""
    if is_kinematic(model):
        raise ModelError(
            f"{caller}: no body of Model {model.name!r} has mass (a kinematic model, such as one built "
            "for muscle moment arms), so M(q) = 0 and its accelerations are undefined. Its kinematics, "
            "muscle geometry and inverse dynamics work; to simulate it, give its bodies mass and inertia."
        )


def _check_user_functions(model: "Model"):
    """What each `JaxFunction` (a user's callable) reads, at a probe near the default pose:
    an index past the coordinates (JAX clamps it, so ``q[5]`` of 2 coordinates would read
    ``q[1]`` silently; NumPy raises, so the callable is called once on a NumPy ``q``), and
    a coordinate its value depends on that its ``coordinates`` do not list (a nonzero
    finite derivative; a derivative that vanishes at the probe goes unseen). Skipped where
    the model's numbers are traced."""
    names = model.coordinate_names
    probe = _concrete(model.q_default)
    if probe is None:
        return
    q = probe[0] + 0.05 * (1.0 + np.arange(len(names)) / max(len(names), 1))
    for j in model.joints:
        f = j.function
        if not isinstance(f, JaxFunction) or _concrete(*jax.tree.leaves(f.params)) is None:
            continue
        try:
            f.fn(q, f.params)
        except IndexError as e:
            raise ModelError(f"Joint {j.name!r}: its JaxFunction reads an index past the model's {len(names)} "
                             f"coordinates {names} ({e}); fn(q, params) receives the model's whole q.") from None
        except Exception:  # noqa: BLE001 -- a callable that needs JAX arrays: learn nothing from NumPy
            pass
        grad = np.asarray(jax.grad(f)(jnp.asarray(q)))
        unlisted = [names[k] for k in np.flatnonzero(np.isfinite(grad) & (grad != 0.0)) if k not in f.coordinates]
        if unlisted:
            raise ModelError(f"Joint {j.name!r}: its JaxFunction depends on the coordinates {unlisted}, which its "
                             f"coordinates {[names[k] for k in f.coordinates]} do not list; list every coordinate "
                             "fn reads (JaxFunction(fn, params, coordinates)).")


def _check_regular(model: "Model"):
    """Structural causes of a singular mass matrix, found with NumPy at build time (no
    compilation): a coordinate that no joint function reads, a moving subtree without
    mass, and a revolute joint whose moving subtree has no inertia about its axis at the
    default pose. The mass checks are skipped when the model's parameters are traced,
    and for a kinematic model (no body has mass: `is_kinematic`), whose forward dynamics
    are refused at the call instead (`require_mass`)."""
    reads = [set(j.function.coordinate_indices()) for j in model.joints]
    for k, name in enumerate(model.coordinate_names):
        if not any(k in r for r in reads):
            raise ModelError(
                f"Model {model.name!r}: no joint function reads coordinate {name!r} (index {k}), so "
                "it has no inertia and the mass matrix is singular; remove the coordinate or drive "
                "a joint with it (e.g. Coordinate(index))."
            )
    inertial = _concrete(*(x for b in model.bodies for x in (b.mass, b.com, b.inertia)))
    if inertial is None or is_kinematic(model):
        return  # traced, or no body has mass (`require_mass` refuses its forward dynamics)
    mass = inertial[0::3]
    com = inertial[1::3]
    inertia = inertial[2::3]
    n = len(model.joints)
    # Per subtree, accumulated children first (one pass, not one per joint: a chain of n
    # bodies took n² eigenvalue problems): its mass, its largest inertia entry, and the
    # largest smallest principal moment among its bodies with mass.
    total_mass = [float(m) for m in mass]
    largest = [float(np.max(np.abs(i))) for i in inertia]
    least_moment = [float(np.linalg.eigvalsh(inertia[k])[0]) if mass[k] > 0 else -np.inf for k in range(n)]
    for k in reversed(model.order):
        p = model.parents[k]
        if p >= 0:
            total_mass[p] += total_mass[k]
            largest[p] = max(largest[p], largest[k])
            least_moment[p] = max(least_moment[p], least_moment[k])
    frames = None  # joints' local frames at the default pose, computed on demand
    for i, joint in enumerate(model.joints):
        if not reads[i]:
            continue
        coords = [model.coordinate_names[k] for k in sorted(reads[i])]
        total = total_mass[i]
        if not total > 0.0:
            raise ModelError(
                f"Model {model.name!r}: body {joint.child!r} and the bodies it carries have no mass, "
                f"but joint {joint.name!r} moves them with coordinate(s) {coords}; the mass matrix is "
                "singular. Give the end body mass and inertia, or make the joint a weld (Constant)."
            )
        if joint.kind != "revolute" or least_moment[i] > 1e-9 * largest[i]:
            continue  # a body of the subtree has inertia about every axis
        if frames is None:
            frames = _default_frames(model)
            if frames is None:
                return
            composites = _subtree_composites(model, frames, mass, com, inertia, total_mass)
        total_inertia, first = composites[i]
        rc, tc = np.asarray(joint.child_rotation), np.asarray(joint.child_translation)
        a = np.asarray(joint.axis)
        w, v = rc.T @ a, rc.T @ np.cross(a, tc)
        # S = (ω, v) with v = -ω × o for the axis through o: the inertia about the axis line.
        moment = w @ total_inertia @ w + 2.0 * w @ np.cross(first, v) + total * v @ v
        if not moment > 1e-12 * max(total, float(np.trace(total_inertia))):
            raise ModelError(
                f"Model {model.name!r}: the bodies moved by revolute joint {joint.name!r} (body "
                f"{joint.child!r} and its descendants) have no inertia about its axis at the default "
                f"pose, so coordinate(s) {coords} have no inertia and the mass matrix is singular. "
                "Give the bodies inertia about that axis, or make the joint a weld (Constant)."
            )


def _subtree_composites(model: "Model", frames, mass, com, inertia, total_mass) -> list:
    """Per body i, its subtree's rotational inertia about body i's origin and its first
    moment of mass, both in body i's axes at the default pose (the composite-rigid-body
    sums, accumulated children first in one pass): a child's ``(J, h, M)`` in the parent's
    axes, with ``x = R x' + t``, is ``R J Rᵀ + (2 t·R h + M |t|²) E - (R h tᵀ + t (R h)ᵀ + M t tᵀ)``
    and ``R h + M t`` (`total_mass`: the subtrees' masses M)."""
    rot, trans = frames
    eye = np.eye(3)
    first = [mass[k] * com[k] for k in range(len(mass))]
    about = [inertia[k] + mass[k] * (com[k] @ com[k] * eye - np.outer(com[k], com[k])) for k in range(len(mass))]
    for k in reversed(model.order):
        p = model.parents[k]
        if p < 0:
            continue
        r, t = rot[k], trans[k]
        h = r @ first[k]
        about[p] = about[p] + r @ about[k] @ r.T + (2.0 * t @ h + total_mass[k] * t @ t) * eye - (
            np.outer(h, t) + np.outer(t, h) + total_mass[k] * np.outer(t, t))
        first[p] = first[p] + h + total_mass[k] * t
    return list(zip(about, first))


def _default_frames(model: "Model"):
    """The joints' local frames ``(R, p)`` at ``model.q_default``, in NumPy; None when a
    joint function cannot be evaluated eagerly there."""
    try:
        q = jnp.asarray(model.q_default)
        rot, trans = [], []
        for j in model.joints:
            f = float(np.asarray(j.function(q)))
            rp, tp = np.asarray(j.parent_rotation), np.asarray(j.parent_translation)
            rc, tc = np.asarray(j.child_rotation), np.asarray(j.child_translation)
            a = np.asarray(j.axis)
            x, d = (_np_rotation(a, f), np.zeros(3)) if j.kind == "revolute" else (np.eye(3), f * a)
            rot.append(rp @ x @ rc)
            trans.append(rp @ (x @ tc + d) + tp)
        return rot, trans
    except Exception:  # noqa: BLE001 - a check, not a requirement: skip it
        return None


def _check_muscles(model: "Model"):
    """Each muscle is a `jaxmb.Muscle` (anything with its ``check_model``) whose bodies and
    coordinates the model has, and no two share a name (results, path sets and the CLI's
    columns are keyed by it)."""
    seen = set()
    for muscle in model.muscles:
        if not callable(getattr(muscle, "check_model", None)) or not isinstance(getattr(muscle, "name", None), str):
            raise ModelError(f"Model {model.name!r}: muscles must be jaxmb.Muscle objects, got "
                             f"{type(muscle).__name__}.")
        if muscle.name in seen:
            raise ModelError(f"Model {model.name!r}: two muscles are named {muscle.name!r}; give each a name of "
                             "its own.")
        seen.add(muscle.name)
        muscle.check_model(model)
