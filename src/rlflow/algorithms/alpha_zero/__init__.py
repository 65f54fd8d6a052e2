"""AlphaZero (Silver et al. 2018, "A general reinforcement learning algorithm that masters
chess, shogi and Go through self-play"; RLlib's contributed ``AlphaZero``) as a dataflow plan.

For two-player turn-based games with action masks (PettingZoo's AEC classic envs:
``pettingzoo.classic.tictactoe_v3``, ``connect_four_v3``). The rollout workers play games of
self-play, every move chosen by a PUCT Monte-Carlo tree search over copies of the game
(`rlflow.algorithms.alpha_zero.search`: Dirichlet noise at the root, virtual loss, a temperature
for the first ``temperature_moves`` moves); the leaves of all of a worker's concurrent games are
evaluated in batches by its own copy of the network or, with ``evaluator: shared``, by one
inference actor that batches every worker's (a nested dataflow). The positions (the searches'
visit counts as the policy target, the game's outcome as the value target) go to a replay of
recent games; the learner trains the network's policy and value heads on it (cross-entropy,
squared error, L2) and the weights go back with the next round.

What a game must support (a two-player zero-sum game taking turns, masked ``Discrete`` actions,
a state that can be copied: a ``clone()`` method or plain attributes) is in
`rlflow.algorithms.alpha_zero.game`; an env that does not is refused before any actor starts.
An export holds the network: ``rlflow.load_policy(path)`` acts with its priors, or searches
with ``compute_single_action(obs, env=game, num_simulations=n)`` (the game, as
``rlflow.envs.config_env_creator`` builds it, in the position of ``obs``).

Policy: :class:`AlphaZeroPolicy`. Config: :class:`AlphaZeroConfig`. Plan:
:func:`alpha_zero_plan`.
"""

from typing import TYPE_CHECKING

from rlflow.algorithms.alpha_zero.config import AlphaZeroConfig
from rlflow.lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (rlflow.lazy): they import torch
    from rlflow.algorithms.alpha_zero.plan import alpha_zero_plan
    from rlflow.algorithms.alpha_zero.policy import AlphaZeroPolicy

__all__ = ["AlphaZeroConfig", "AlphaZeroPolicy", "alpha_zero_plan"]

__getattr__, __dir__ = lazy_exports(
    __name__, {"alpha_zero_plan": "plan", "AlphaZeroPolicy": "policy"}
)
