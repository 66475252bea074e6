"""Bodies, joints and the model tree (Ehsani 2016, sections 3-1 and 3-2).

A :class:`Model` is a tree of rigid :class:`Body` objects, each attached to its
parent by one 1-DOF :class:`Joint` (revolute or prismatic) whose joint variable is
a joint function ``f_i(q)`` of the model's generalized coordinates. Multi-DOF
joints (universal, ball, free, planar, OpenSim custom) are chains of 1-DOF
joints through massless bodies, as Ehsani (2016) prescribes; :class:`ModelBuilder`
has constructors for them.

Topology, names and counts are static fields; every numeric parameter is an
array leaf, so ``jax.grad`` with respect to a model works.
"""

from collections.abc import Sequence
from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._typing import RealLike

from ._checks import finite, flag, real_numbers
from ._errors import ModelError
from ._functions import AbstractJointFunction
from ._loop_closure import ImplicitJointFunction
from ._model_checks import (_check_muscles, _check_ranges, _check_regular, _check_user_functions, _concrete, _round_off,
                            _validate_inertial)
from ._spatial import homogeneous, rotation_about_axis, skew

GROUND = "ground"


def _f(x, shape=None, what: str | None = None) -> Array:
    """`x` as a float array of `shape`; with `what` (the object and argument, for the
    message), also finite where its values are at hand (NaN or inf: a ModelError)."""
    x = real_numbers(x, what or "a model parameter")
    if shape is not None and x.shape != shape:
        raise ModelError(f"{what + ' must have' if what else 'expected an array of'} shape {shape}, got {x.shape}.")
    return x if what is None else finite(x, what)


class Body(eqx.Module):
    """A rigid body.

    **Arguments:**

    - `name`: unique name.
    - `mass`: kg, > 0 (or exactly 0 with `massless=True`, for the virtual bodies
      between the 1-DOF joints of a multi-DOF joint).
    - `com`: (3,) centre of mass in the body frame, m.
    - `inertia`: (3, 3) inertia tensor about the centre of mass, body axes, kg m².
      Must be symmetric positive semi-definite and satisfy the triangle inequality
      of principal moments (``I1 + I2 >= I3``).
    """

    name: str = eqx.field(static=True)
    mass: Float[Array, ""]
    com: Float[Array, "3"]
    inertia: Float[Array, "3 3"]
    massless: bool = eqx.field(static=True)

    def __init__(self, name: str, mass: RealLike, com: RealLike = (0.0, 0.0, 0.0),
                 inertia: RealLike | None = None, massless: bool = False):
        self.name = str(name)
        self.mass = _f(mass, what=f"Body {name!r}: mass")
        self.com = _f(com, what=f"Body {name!r}: com")
        self.inertia = _f(np.zeros((3, 3)) if inertia is None else inertia, what=f"Body {name!r}: inertia")
        if self.inertia.shape == (3,):
            with jax.ensure_compile_time_eval():  # concrete where given concrete, as float_array
                self.inertia = jnp.diag(self.inertia)
        self.massless = flag(massless, f"Body {name!r}: massless")
        if self.mass.shape != () or self.com.shape != (3,) or self.inertia.shape != (3, 3):
            raise ModelError(
                f"Body {name!r}: mass must be a scalar, com (3,) and inertia (3, 3) or (3,) "
                f"diagonal; got {self.mass.shape}, {self.com.shape}, {self.inertia.shape}."
            )
        values = _concrete(self.mass, self.com, self.inertia)
        if values is not None:
            _validate_inertial(self.name, *values, massless=self.massless)

    @classmethod
    def virtual(cls, name: str) -> "Body":
        """A massless, inertia-less body (the links of a multi-DOF joint chain)."""
        return cls(name, 0.0, massless=True)


JointKind = Literal["revolute", "prismatic"]


class Joint(eqx.Module):
    """A 1-DOF joint between `parent` and `child` (Ehsani 2016, Eq. 38-39, Fig. 1).

    The child frame in the parent frame is ``A4 = P · X(f) · C`` where

    - ``P = [[parent_rotation, parent_translation], [0, 1]]`` is a constant offset
      (Ehsani's ``d_i V_d`` translation of a revolute joint),
    - ``X(f)`` is a rotation by ``f`` about `axis` (revolute, Eq. 39) or a translation
      ``f * axis`` (prismatic), `axis` a unit vector in the offset frame,
    - ``C = [[child_rotation, child_translation], [0, 1]]`` is a constant offset
      (Ehsani's constant rotation ``θ_i`` of a prismatic joint),

    and ``f = function(q)`` is the joint variable (rad or m).
    """

    name: str = eqx.field(static=True)
    parent: str = eqx.field(static=True)
    child: str = eqx.field(static=True)
    kind: str = eqx.field(static=True)
    axis: Float[Array, "3"]
    function: AbstractJointFunction
    parent_rotation: Float[Array, "3 3"]
    parent_translation: Float[Array, "3"]
    child_rotation: Float[Array, "3 3"]
    child_translation: Float[Array, "3"]

    # `kind` and `function` are annotated loosely: they are checked below, with a ModelError
    # that names the joint and the fix (clearer than a run-time type-check error).
    def __init__(self, name: str, parent: str, child: str, kind: str,
                 axis: RealLike, function: Any,
                 parent_translation: RealLike = (0.0, 0.0, 0.0),
                 parent_rotation: RealLike | None = None,
                 child_translation: RealLike = (0.0, 0.0, 0.0),
                 child_rotation: RealLike | None = None):
        self.name, self.parent, self.child = str(name), str(parent), str(child)
        if kind not in ("revolute", "prismatic"):
            raise ModelError(f"Joint {name!r}: kind must be 'revolute' or 'prismatic', got {kind!r}.")
        self.kind = kind
        if not isinstance(function, AbstractJointFunction):
            raise ModelError(
                f"Joint {name!r}: function must be a jaxmb joint function (Coordinate, "
                f"CubicSpline, ...), got {type(function).__name__}."
            )
        self.function = function
        axis = _f(axis, what=f"Joint {name!r}: axis")
        if axis.shape != (3,):
            raise ModelError(f"Joint {name!r}: axis must have shape (3,), got {axis.shape}.")
        vals = _concrete(axis)
        if vals is not None:
            norm = float(np.linalg.norm(vals[0]))
            if not np.isfinite(norm) or norm < 1e-12:
                raise ModelError(f"Joint {name!r} has a zero (or non-finite) axis {vals[0]}; give a unit vector.")
            axis = axis / norm
        self.axis = axis
        self.parent_translation = _f(parent_translation, (3,), f"Joint {name!r}: parent_translation")
        self.parent_rotation = _f(jnp.eye(3) if parent_rotation is None else parent_rotation, (3, 3),
                                  f"Joint {name!r}: parent_rotation")
        self.child_translation = _f(child_translation, (3,), f"Joint {name!r}: child_translation")
        self.child_rotation = _f(jnp.eye(3) if child_rotation is None else child_rotation, (3, 3),
                                 f"Joint {name!r}: child_rotation")
        for label, arr in (("parent_rotation", self.parent_rotation), ("child_rotation", self.child_rotation)):
            vals = _concrete(arr)
            if vals is not None:
                r = vals[0]
                if np.max(np.abs(r.T @ r - np.eye(3))) > _round_off(r, 1e-9) or np.linalg.det(r) < 0:
                    raise ModelError(f"Joint {name!r}: {label} is not a proper rotation matrix:\n{r}")

    # -- transforms --------------------------------------------------------
    def parent_offset(self) -> Float[Array, "4 4"]:
        return homogeneous(self.parent_rotation, self.parent_translation)

    def child_offset(self) -> Float[Array, "4 4"]:
        return homogeneous(self.child_rotation, self.child_translation)

    def motion(self, f) -> Float[Array, "4 4"]:
        """``X(f)``: the joint's own motion (Eq. 38-39)."""
        f = jnp.asarray(f, dtype=self.axis.dtype)
        if self.kind == "revolute":
            return homogeneous(rotation_about_axis(self.axis, f), jnp.zeros(3, self.axis.dtype))
        return homogeneous(jnp.eye(3, dtype=self.axis.dtype), f * self.axis)

    def transform(self, f) -> Float[Array, "4 4"]:
        """``pr(i)_i A4``: child frame in parent frame at joint value ``f``."""
        return self.parent_offset() @ self.motion(f) @ self.child_offset()

    def joint_matrix(self) -> Float[Array, "4 4"]:
        """``Â`` with ``∂A4/∂f = A4 Â`` (Ehsani 2016, Eq. 69-71), in child-body coordinates."""
        z = jnp.zeros((4, 4), dtype=self.axis.dtype)
        if self.kind == "revolute":
            m = z.at[:3, :3].set(skew(self.axis))
        else:
            m = z.at[:3, 3].set(self.axis)
        c = self.child_offset()
        cinv = homogeneous(self.child_rotation.T, -self.child_rotation.T @ self.child_translation)
        return cinv @ m @ c

    def motion_subspace(self) -> Float[Array, "6"]:
        """The joint twist ``S = (ω, v)`` in child-body coordinates: ``Â = [[ω̃, v], [0, 0]]``."""
        j = self.joint_matrix()
        omega = jnp.array([j[2, 1], j[0, 2], j[1, 0]])
        return jnp.concatenate([omega, j[:3, 3]])


def revolute(name: str, parent: str, child: str, axis: RealLike, function: AbstractJointFunction,
             offset: RealLike = (0.0, 0.0, 0.0), **kwargs) -> Joint:
    """A revolute joint: translate by `offset` in the parent frame, then rotate by ``f`` about `axis`.

    The child frame in the parent frame is ``[[A(f), offset], [0, 1]]`` with ``A(f) = 1
    + Ṽ sin f + 2 Ṽ² sin²(f/2)`` (Ehsani 2016, Eq. 38-39, ``Ṽ`` the cross-product
    matrix of the unit axis); ``f = function(q)`` is the joint variable.

    **Arguments:**

    - `name`: the joint's name (unique in the model).
    - `parent`, `child`: names of the parent body (or ``"ground"``) and of the child body.
    - `axis`: `(3,)` rotation axis in the parent frame (after `parent_rotation`, when
      given); normalised to a unit vector.
    - `function`: the joint variable as a joint function of ``q`` (rad), e.g.
      [`jaxmb.Coordinate`][jaxmb.Coordinate].
    - `offset`: `(3,)` translation of the joint centre in the parent frame (m),
      Ehsani's ``d_i V_d``.
    - `**kwargs`: further keyword arguments of [`jaxmb.Joint`][jaxmb.Joint]
      (`parent_rotation`, `child_translation`, `child_rotation`).

    **Returns:**

    A [`jaxmb.Joint`][jaxmb.Joint] of kind ``"revolute"``.
    """
    return Joint(name, parent, child, "revolute", axis, function, parent_translation=offset, **kwargs)


def prismatic(name: str, parent: str, child: str, axis: RealLike, function: AbstractJointFunction,
              offset: RealLike = (0.0, 0.0, 0.0), rotation: RealLike | None = None, **kwargs) -> Joint:
    """A prismatic joint: translate by ``offset + f * axis`` in the parent frame, then the constant `rotation`.

    The child frame in the parent frame is ``[[R, offset + f V_d], [0, 1]]`` (Ehsani
    2016, Eq. 38 with the joint variable ``d_i = f`` and a constant rotation);
    ``f = function(q)`` is the joint variable.

    **Arguments:**

    - `name`: the joint's name (unique in the model).
    - `parent`, `child`: names of the parent body (or ``"ground"``) and of the child body.
    - `axis`: `(3,)` sliding direction in the parent frame (after `parent_rotation`,
      when given); normalised to a unit vector.
    - `function`: the joint variable as a joint function of ``q`` (m).
    - `offset`: `(3,)` constant translation in the parent frame (m).
    - `rotation`: `(3, 3)` constant rotation of the child frame (Ehsani's constant
      ``θ_i``), or `None` for the identity.
    - `**kwargs`: further keyword arguments of [`jaxmb.Joint`][jaxmb.Joint]
      (`parent_rotation`, `child_translation`).

    **Returns:**

    A [`jaxmb.Joint`][jaxmb.Joint] of kind ``"prismatic"``.
    """
    return Joint(name, parent, child, "prismatic", axis, function, parent_translation=offset,
                 child_rotation=rotation, **kwargs)


class Model(eqx.Module):
    """A tree of rigid bodies with joint variables ``f_i(q)``.

    **Arguments:**

    - `bodies`: the bodies (any order).
    - `joints`: one joint per body, whose `child` is that body. Their order is the
      order of ``joint_names`` and ``joint_values``; ``body_names`` follows it too
      (body i is the child of joint i). It need not be parents-first: ``order``
      holds a parents-first traversal.
    - `coordinate_names`: names of the generalized coordinates ``q`` (nq,).
    - `gravity`: (3,) gravitational acceleration in ground axes, m/s².
    - `loads`: applied loads that are part of the model (e.g. the spring of Cesari et al. (2001)).
    - `q_default`, `q_lower`, `q_upper`: default value and range of each coordinate.
    - `muscles`: musculotendon paths (see the muscles module), may be empty.
    - `forces`: the ForceSet's other elements (actuators, springs, limit forces,
      ligaments: the [`jaxmb.AbstractForce`][jaxmb.AbstractForce] family, a layer above), may be empty;
      [`jaxmb.force_set_forces`][jaxmb.force_set_forces] sums their generalized forces and
      [`jaxmb.forward_dynamics`][jaxmb.forward_dynamics] adds them (actuators at zero control).

    ``loops`` (static, derived from the joints) lists, per loop closure, the joints
    whose functions are its dependent variables (:class:`~jaxmb.ImplicitJointFunction`
    s holding one and the same :class:`~jaxmb.LoopClosure`), so that kinematics
    solves each loop once per state for all of them.

    Raises :class:`jaxmb.ModelError` for an unknown parent, a cycle, duplicate
    names, a body without a joint (or with two), a joint function reading a
    coordinate that does not exist, or an invalid body (see :class:`Body`).
    """

    bodies: tuple[Body, ...]
    joints: tuple[Joint, ...]
    gravity: Float[Array, "3"]
    loads: tuple  # of jaxmb.AbstractLoad (defined a layer above, in _loads)
    q_default: Float[Array, " nq"]
    q_lower: Float[Array, " nq"]
    q_upper: Float[Array, " nq"]
    muscles: tuple
    forces: tuple  # of jaxmb.AbstractForce (defined a layer above, in _forces)
    coordinate_names: tuple[str, ...] = eqx.field(static=True)
    parents: tuple[int, ...] = eqx.field(static=True)
    order: tuple[int, ...] = eqx.field(static=True)
    name: str = eqx.field(static=True)
    loops: tuple[tuple[int, ...], ...] = eqx.field(static=True)

    def __init__(self, bodies: Sequence[Body], joints: Sequence[Joint], coordinate_names: Sequence[str],
                 gravity: RealLike = (0.0, -9.81, 0.0), loads: Sequence = (),
                 q_default: RealLike | None = None, q_lower: RealLike | None = None,
                 q_upper: RealLike | None = None, muscles: Sequence = (), name: str = "model",
                 forces: Sequence = ()):
        self.name = str(name)
        if isinstance(coordinate_names, str):  # its characters would become the coordinates
            raise ModelError(f"Model: coordinate_names must be a sequence of names, got the string "
                             f"{coordinate_names!r}; write [{coordinate_names!r}] for one coordinate.")
        self.coordinate_names = tuple(str(c) for c in coordinate_names)
        nq = len(self.coordinate_names)
        _no_duplicates("coordinate", self.coordinate_names)
        bodies = tuple(bodies)
        joints = tuple(joints)
        for b in bodies:
            if not isinstance(b, Body):
                raise ModelError(f"Model {name!r}: bodies must be jaxmb.Body, got {type(b).__name__}.")
        for j in joints:
            if not isinstance(j, Joint):
                raise ModelError(f"Model {name!r}: joints must be jaxmb.Joint, got {type(j).__name__}.")
        body_names = [b.name for b in bodies]
        _no_duplicates("body", body_names)
        _no_duplicates("joint", [j.name for j in joints])
        if GROUND in body_names:
            raise ModelError(f"A body may not be called {GROUND!r}: that name is the fixed ground frame.")
        if not bodies:  # else it builds, and every call fails deep inside (jnp.stack of nothing)
            raise ModelError(f"Model {name!r} has no bodies; add at least one body and the joint that moves it.")
        by_child: dict[str, Joint] = {}
        for j in joints:
            if j.child == GROUND:  # the message below would ask for a body that may not be added
                raise ModelError(f"Joint {j.name!r} moves {GROUND!r}, the fixed frame; make ground its parent "
                                 "and a body its child.")
            if j.child not in body_names:
                raise ModelError(f"Joint {j.name!r} moves unknown body {j.child!r}; add that body first.")
            if j.parent != GROUND and j.parent not in body_names:
                raise ModelError(
                    f"Joint {j.name!r} has unknown parent {j.parent!r}; known bodies: "
                    f"{[GROUND] + body_names}."
                )
            if j.parent == j.child:
                raise ModelError(f"Joint {j.name!r} connects body {j.child!r} to itself.")
            if j.child in by_child:
                raise ModelError(
                    f"Body {j.child!r} is the child of two joints ({by_child[j.child].name!r} and "
                    f"{j.name!r}); a tree has one parent joint per body. Close loops with joint "
                    "functions instead (see jaxmb.constraints)."
                )
            by_child[j.child] = j
        for b in body_names:
            if b not in by_child:
                raise ModelError(f"Body {b!r} has no joint to a parent; add a joint whose child is {b!r}.")
            for idx in by_child[b].function.coordinate_indices():
                if not 0 <= idx < nq:
                    raise ModelError(
                        f"Joint {by_child[b].name!r}: its function reads coordinate index {idx}, "
                        f"but the model has {nq} coordinates {self.coordinate_names}."
                    )
        # Joints keep the user's order (it is the order of joint_names and joint_values);
        # body i is the child of joint i. `order` is a parents-first traversal for the
        # recursions, stable in the user's order.
        body_by_name = {b.name: b for b in bodies}
        self.joints = tuple(joints)
        self.bodies = tuple(body_by_name[j.child] for j in self.joints)
        index = {j.child: i for i, j in enumerate(self.joints)}
        self.parents = tuple(-1 if j.parent == GROUND else index[j.parent] for j in self.joints)
        order: list[int] = []
        placed: set[int] = set()
        remaining = list(range(len(self.joints)))
        while remaining:
            progress = [i for i in remaining if self.parents[i] < 0 or self.parents[i] in placed]
            if not progress:
                raise ModelError(
                    f"Model {name!r}: the bodies {[self.joints[i].child for i in remaining]} form a cycle "
                    "(each is its own ancestor); a model must be a tree rooted at ground."
                )
            for i in progress:
                order.append(i)
                placed.add(i)
                remaining.remove(i)
        self.order = tuple(order)
        self.gravity = _f(gravity, (3,), f"Model {name!r}: gravity")
        for load in loads:
            # AbstractLoad lives a layer above (jaxmb._loads): recognised by what it has.
            if not (isinstance(load, eqx.Module) and isinstance(getattr(load, "body", None), str)
                    and callable(getattr(load, "generalized_force", None))):
                raise ModelError(f"Model {name!r}: loads must be jaxmb loads (jaxmb.AbstractLoad: PointForce, "
                                 f"BodyTorque, LinearSpring, ... or a subclass), got {type(load).__name__}.")
            if load.body not in index:
                raise ModelError(f"Load {type(load).__name__} on unknown body {load.body!r}.")
        self.loads = tuple(loads)
        self.q_default = _f(jnp.zeros(nq) if q_default is None else q_default, (nq,))
        self.q_lower = _f(jnp.full(nq, -jnp.inf) if q_lower is None else q_lower, (nq,))
        self.q_upper = _f(jnp.full(nq, jnp.inf) if q_upper is None else q_upper, (nq,))
        self.muscles = tuple(muscles)
        self.forces = tuple(forces)
        self.loops = _loop_groups(self.joints)
        _check_ranges(self)
        _check_user_functions(self)
        _check_regular(self)
        _check_muscles(self)
        for force in self.forces:  # names its bodies and coordinates against this model
            force.check_model(self)

    # -- static topology ---------------------------------------------------
    @property
    def nq(self) -> int:
        return len(self.coordinate_names)

    @property
    def n_bodies(self) -> int:
        return len(self.bodies)

    @property
    def body_names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.bodies)

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    @property
    def muscle_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.muscles)

    def body_index(self, name: str) -> int:
        try:
            return self.body_names.index(name)
        except ValueError:
            raise ModelError(f"Model {self.name!r} has no body {name!r}; bodies: {self.body_names}.") from None

    def coordinate_index(self, name: str) -> int:
        try:
            return self.coordinate_names.index(name)
        except ValueError:
            raise ModelError(
                f"Model {self.name!r} has no coordinate {name!r}; coordinates: {self.coordinate_names}."
            ) from None

    def ancestors(self, i: int) -> tuple[int, ...]:
        """``Anc(i)``: moving ancestors of body i, root first (Ehsani 2016, section 3-1)."""
        out = []
        p = self.parents[i]
        while p >= 0:
            out.append(p)
            p = self.parents[p]
        return tuple(reversed(out))

    def children(self, i: int) -> tuple[int, ...]:
        return tuple(k for k, p in enumerate(self.parents) if p == i)


def _loop_groups(joints: Sequence[Joint]) -> tuple[tuple[int, ...], ...]:
    """The joints of each loop: those whose functions are ImplicitJointFunctions of the
    very same LoopClosure object (identity, recorded now: jit and tree_at make copies),
    in the order of the loop's dependent variables."""
    groups: list[tuple[object, list[int]]] = []
    for i, j in enumerate(joints):
        fn = j.function
        if isinstance(fn, ImplicitJointFunction):
            for closure, members in groups:
                if closure is fn.closure:
                    members.append(i)
                    break
            else:
                groups.append((fn.closure, [i]))
    for _, members in groups:
        members.sort(key=lambda i: joints[i].function.index)
    return tuple(tuple(members) for _, members in groups)


def _no_duplicates(kind: str, names: Sequence[str]):
    seen = set()
    for n in names:
        if n in seen:
            raise ModelError(f"Duplicate {kind} name {n!r}; {kind} names must be unique.")
        seen.add(n)
