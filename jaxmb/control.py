"""Controllers for [`jaxmb.simulate`][jaxmb.simulate]: PID and computed-torque tracking."""

from ._control import PID as PID
from ._control import AbstractController as AbstractController
from ._control import ComputedTorque as ComputedTorque
