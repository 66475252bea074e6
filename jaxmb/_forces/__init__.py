"""The ForceSet's non-muscle elements and their generalized forces ``Q(q, q', u)``."""

from ._actuators import CoordinateActuator as CoordinateActuator
from ._actuators import PointActuator as PointActuator
from ._actuators import TorqueActuator as TorqueActuator
from ._base import AbstractActuator as AbstractActuator
from ._base import AbstractForce as AbstractForce
from ._base import actuator_forces as actuator_forces
from ._base import actuator_names as actuator_names
from ._base import force_set_forces as force_set_forces
from ._expression import ExpressionBasedCoordinateForce as ExpressionBasedCoordinateForce
from ._expression import parse_expression as parse_expression
from ._ligament import Ligament as Ligament
from ._springs import BushingForce as BushingForce
from ._springs import CoordinateLimitForce as CoordinateLimitForce
from ._springs import PointToPointSpring as PointToPointSpring
