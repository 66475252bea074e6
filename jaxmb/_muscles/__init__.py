"""Musculotendon paths, wrapping and the moment-arm matrix (Ehsani 2016, Eq. 149-195).

A `Muscle` is a path of points fixed on bodies (`PathPoint`),
points that exist only while a coordinate lies in a range
(`ConditionalPathPoint`), points whose body-frame location is a function
of ``q`` (`MovingPathPoint`), and wrap objects (`WrapSphere`,
`WrapCylinder`, `WrapEllipsoid`, `WrapTorus`) that the path
slides over; or its path is a function of the coordinates (`FunctionBasedPath`, a
`MultivariatePolynomial` of them, as OpenSim's ``PolynomialPathFitter`` fits it). Its
length ``L(q)`` is what `muscle_lengths` returns; the
moment-arm matrix follows the biomechanics sign ``R = -dL/dq`` (nq, n_muscles),
so that the generalized force of the tensions ``F`` is ``R @ F``.

Each muscle may carry a Hill-type force model (`Thelen2003Muscle`,
`Millard2012EquilibriumMuscle`, `DeGrooteFregly2016Muscle`, of the family `AbstractMusculotendonModel`) and activation
dynamics (`FirstOrderActivation`, `DeGrooteActivation`); `muscle_forces` gives the tendon
forces ``F`` of all of them at once.
"""

from ._activation import AbstractActivationDynamics as AbstractActivationDynamics
from ._muscle_forces import activation_rates as activation_rates
from ._activation import DeGrooteActivation as DeGrooteActivation
from ._activation import FirstOrderActivation as FirstOrderActivation
from ._cylinder import WrapCylinder as WrapCylinder
from ._function_path import FunctionBasedPath as FunctionBasedPath
from ._function_path import MultivariatePolynomial as MultivariatePolynomial
from ._function_path import polynomial_exponents as polynomial_exponents
from ._degroote import DeGrooteFregly2016Muscle as DeGrooteFregly2016Muscle
from ._ellipsoid import WrapEllipsoid as WrapEllipsoid
from ._millard import Millard2012EquilibriumMuscle as Millard2012EquilibriumMuscle
from ._moment_arms import check_path_force_route as check_path_force_route
from ._moment_arms import gmlav_loads as gmlav_loads
from ._moment_arms import moment_arm_derivatives as moment_arm_derivatives
from ._sweep import moment_arm_sweep as moment_arm_sweep
from ._moment_arms import moment_arms as moment_arms
from ._moment_arms import muscle_lengths_and_moment_arms as muscle_lengths_and_moment_arms
from ._muscle import Muscle as Muscle
from ._muscle_forces import muscle_forces as muscle_forces
from ._muscle_forces import muscle_states as muscle_states
from ._muscle_forces import musculotendon_activation_rates as musculotendon_activation_rates
from ._muscle_forces import musculotendon_states as musculotendon_states
from ._muscle_forces import ACTIVE_FORCES as ACTIVE_FORCES
from ._muscle_forces import rigid_tendon_forces as rigid_tendon_forces
from ._musculotendon import AbstractMusculotendonModel as AbstractMusculotendonModel
from ._musculotendon import MusculotendonForces as MusculotendonForces
from ._muscle import MuscleParameters as MuscleParameters
from ._path_points import AbstractPathPoint as AbstractPathPoint
from ._path_points import ClampedCoordinate as ClampedCoordinate
from ._path_points import CONDITIONAL_SLACK as CONDITIONAL_SLACK
from ._path_points import ConditionalPathPoint as ConditionalPathPoint
from ._path_points import MovingPathPoint as MovingPathPoint
from ._path_points import PathPoint as PathPoint
from ._paths import muscle_lengthening_speeds as muscle_lengthening_speeds
from ._paths import muscle_lengths as muscle_lengths
from ._path_events import path_events as path_events
from ._path_events import PathEvents as PathEvents
from ._path_events import path_status as path_status
from ._path_events import PathStatus as PathStatus
from ._sphere import WrapSphere as WrapSphere
from ._thelen import Thelen2003Muscle as Thelen2003Muscle
from ._torus import WrapTorus as WrapTorus
from ._wrap_base import AbstractWrapObject as AbstractWrapObject
