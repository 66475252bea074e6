"""Built-in models: the seeds' examples."""

from ._classic import double_pendulum as double_pendulum
from ._classic import double_pendulum_torques as double_pendulum_torques
from ._classic import planar_chain as planar_chain
from ._classic import three_link_arm as three_link_arm
