"""Studies: published simulations reproduced end to end on jaxmb's building blocks
(the shoulder study of Ehsani (2016), section 4-4 C)."""

from ._shoulder import DISTAL_COORDINATES as DISTAL_COORDINATES
from ._shoulder import computed_torque as computed_torque
from ._shoulder import ElevationTrajectory as ElevationTrajectory
from ._shoulder import SHOULDER_COORDINATES as SHOULDER_COORDINATES
from ._shoulder import SHOULDER_MUSCLES as SHOULDER_MUSCLES
from ._shoulder import shoulder_model as shoulder_model
from ._shoulder import ShoulderTracking as ShoulderTracking
from ._shoulder import track_shoulder as track_shoulder
from ._shoulder_dae import CoupledDAE as CoupledDAE
from ._shoulder_dae import track_shoulder_dae as track_shoulder_dae
