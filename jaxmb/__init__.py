"""jaxmb: JAX-accelerated, differentiable multibody and musculoskeletal dynamics.

Joint variables are smooth functions f(q) of the minimal coordinates q
(Ehsani, "Empirically-based multibody dynamics"), so constrained and empirical
joints give an ODE  M(q) q'' + N(q, q') q' = G(q) + Q  without constraint drift.

jaxmb never switches on float64 itself: call
``jax.config.update("jax_enable_x64", True)`` where accuracy matters.
"""

from . import constraints as constraints
from . import control as control
from . import io as io
from . import matrix_calculus as matrix_calculus
from . import models as models
from . import studies as studies
from ._loop_closure import implicit_joint_functions as implicit_joint_functions
from ._loop_closure import ImplicitJointFunction as ImplicitJointFunction
from ._loop_closure import LoopClosure as LoopClosure
from ._loop_closure import LoopClosureError as LoopClosureError
from ._loop_closure import LoopSolution as LoopSolution
from ._dynamics import bias_forces as bias_forces
from ._dynamics import forward_dynamics as forward_dynamics
from ._dynamics import generalized_forces as generalized_forces
from ._dynamics import gravity_forces as gravity_forces
from ._dynamics import inverse_dynamics as inverse_dynamics
from ._dynamics import inverse_dynamics_series as inverse_dynamics_series
from ._dynamics import inverse_dynamics_terms as inverse_dynamics_terms
from ._dynamics import InverseDynamicsTerms as InverseDynamicsTerms
from ._dynamics import kinetic_energy as kinetic_energy
from ._dynamics import mass_matrix as mass_matrix
from ._dynamics import potential_energy as potential_energy
from ._dynamics import velocity_forces as velocity_forces
from ._errors import ModelError as ModelError
from ._forces import AbstractActuator as AbstractActuator
from ._forces import AbstractForce as AbstractForce
from ._forces import actuator_forces as actuator_forces
from ._forces import actuator_names as actuator_names
from ._forces import BushingForce as BushingForce
from ._forces import CoordinateActuator as CoordinateActuator
from ._forces import CoordinateLimitForce as CoordinateLimitForce
from ._forces import ExpressionBasedCoordinateForce as ExpressionBasedCoordinateForce
from ._forces import force_set_forces as force_set_forces
from ._forces import Ligament as Ligament
from ._forces import PointActuator as PointActuator
from ._forces import PointToPointSpring as PointToPointSpring
from ._forces import TorqueActuator as TorqueActuator
from ._errors import SimulationError as SimulationError
from ._functions import AbstractJointFunction as AbstractJointFunction
from ._functions import Composed as Composed
from ._functions import Constant as Constant
from ._functions import Coordinate as Coordinate
from ._functions import CubicSpline as CubicSpline
from ._functions import FourierSeries as FourierSeries
from ._functions import JaxFunction as JaxFunction
from ._functions import Linear as Linear
from ._functions import Polynomial as Polynomial
from ._functions import QuinticSpline as QuinticSpline
from ._functions import Scaled as Scaled
from ._builder import ModelBuilder as ModelBuilder
from ._kinematics import body_transforms as body_transforms
from ._kinematics import joint_gradients as joint_gradients
from ._kinematics import joint_hessians as joint_hessians
from ._kinematics import joint_rates as joint_rates
from ._kinematics import joint_transforms as joint_transforms
from ._kinematics import joint_values as joint_values
from ._point_kinematics import angular_jacobians as angular_jacobians
from ._point_kinematics import body_angular_velocities as body_angular_velocities
from ._point_kinematics import point_acceleration as point_acceleration
from ._point_kinematics import point_jacobian as point_jacobian
from ._point_kinematics import point_position as point_position
from ._point_kinematics import point_velocity as point_velocity
from ._loads import AbstractJointSpaceLoad as AbstractJointSpaceLoad
from ._loads import AbstractLoad as AbstractLoad
from ._loads import BodyTorque as BodyTorque
from ._loads import LinearSpring as LinearSpring
from ._loads import PointForce as PointForce
from ._identify import identify as identify
from ._identify import Identification as Identification
from ._identify import trajectory_residuals as trajectory_residuals
from ._model import Body as Body
from ._motion import ExternalForce as ExternalForce
from ._motion import inverse_dynamics_motion as inverse_dynamics_motion
from ._motion import MotionInverseDynamics as MotionInverseDynamics
from ._static_optimization import static_optimization as static_optimization
from ._static_optimization import StaticOptimization as StaticOptimization
from ._model import Joint as Joint
from ._model import Model as Model
from ._model import prismatic as prismatic
from ._model import revolute as revolute
from ._muscles import AbstractActivationDynamics as AbstractActivationDynamics
from ._muscles import AbstractMusculotendonModel as AbstractMusculotendonModel
from ._muscles import DeGrooteActivation as DeGrooteActivation
from ._muscles import DeGrooteFregly2016Muscle as DeGrooteFregly2016Muscle
from ._muscles import Millard2012EquilibriumMuscle as Millard2012EquilibriumMuscle
from ._muscles import FirstOrderActivation as FirstOrderActivation
from ._muscles import muscle_forces as muscle_forces
from ._muscles import muscle_states as muscle_states
from ._muscles import activation_rates as activation_rates
from ._muscles import MusculotendonForces as MusculotendonForces
from ._muscles import Thelen2003Muscle as Thelen2003Muscle
from ._muscles import ConditionalPathPoint as ConditionalPathPoint
from ._muscles import FunctionBasedPath as FunctionBasedPath
from ._muscles import MultivariatePolynomial as MultivariatePolynomial
from ._muscles import polynomial_exponents as polynomial_exponents
from ._path_fitting import fit_function_paths as fit_function_paths
from ._path_fitting import FunctionPathFit as FunctionPathFit
from ._path_fitting import sample_around_motion as sample_around_motion
from ._muscles import moment_arm_derivatives as moment_arm_derivatives
from ._muscles import moment_arm_sweep as moment_arm_sweep
from ._muscles import moment_arms as moment_arms
from ._muscles import MovingPathPoint as MovingPathPoint
from ._muscles import Muscle as Muscle
from ._muscles import muscle_lengthening_speeds as muscle_lengthening_speeds
from ._muscles import muscle_lengths as muscle_lengths
from ._muscles import muscle_lengths_and_moment_arms as muscle_lengths_and_moment_arms
from ._muscles import MuscleParameters as MuscleParameters
from ._muscles import path_events as path_events
from ._muscles import PathEvents as PathEvents
from ._muscles import path_status as path_status
from ._muscles import PathStatus as PathStatus
from ._muscles import PathPoint as PathPoint
from ._muscles import WrapCylinder as WrapCylinder
from ._muscles import WrapEllipsoid as WrapEllipsoid
from ._muscles import WrapSphere as WrapSphere
from ._muscles import WrapTorus as WrapTorus
from ._results import RESULTS as RESULTS
from ._simulate import simulate as simulate
from ._simulate import Solution as Solution
from ._solvers import stage_root_finder as stage_root_finder
from .io._osim import load_osim as load_osim

from importlib import metadata as _metadata

# The version of the installed package (pyproject.toml's), or 0+unknown for a source tree never installed.
__version__ = next((d.version for d in _metadata.distributions(name="jaxmb")), "0+unknown")
