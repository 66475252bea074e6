"""Controllers for [`jaxmb.simulate`][jaxmb.simulate]: PID, computed-torque tracking and muscles driven by excitations."""

from ._control import PID as PID
from ._control import AbstractController as AbstractController
from ._control import ComputedTorque as ComputedTorque
from ._control import MuscleExcitations as MuscleExcitations
