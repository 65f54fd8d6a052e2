"""VDN: value-decomposition networks (Sunehag et al., AAMAS 2018), QMIX with the sum mixer.

Each member of a team (``groups``) has a recurrent Q network on its own observation; the team's
Q-value is their sum, trained on the team reward on replayed episode sequences. Everything but
the mixer is QMIX's (`rlflow.algorithms.qmix`): the policy is `QMIXPolicy` (through the
registry), the config :class:`VDNConfig` (QMIX's, ``mixer: vdn``), the plan :func:`vdn_plan`.

>>> VDNConfig(env="two_step_game", groups={"team": ["agent_0", "agent_1"]}).mixer
'vdn'
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.vdn.config import VDNConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy)
    from rlflow.algorithms.vdn.plan import vdn_plan

__all__ = ["VDNConfig", "vdn_plan"]

__getattr__, __dir__ = lazy_exports(__name__, {"vdn_plan": "plan"})
