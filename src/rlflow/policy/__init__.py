"""Torch policies: the `TorchPolicy` base and the pieces several algorithms share.

Where to start: :class:`TorchPolicy` (the model, acting, the loss's inputs, weights and
checkpoint state; its update, `rlflow.learner.PolicyUpdate`, learns); a new algorithm
subclasses it (or :class:`ActorCriticPolicy`, for GAE postprocessing) in its own package,
``rlflow.algorithms.<name>.policy``, and writes ``loss``. Shared here: :func:`adaptive_kl_coeff`
(PPO, MAML), `rlflow.policy.entropy_schedule` (the entropy bonus on a schedule) and
`rlflow.policy.spaces` (which spaces a policy takes). The bases of algorithm families live with
them (`rlflow.algorithms.actor_learner`, `rlflow.algorithms.twin_q`).
"""

from rlflow.policy.policy import ActorCriticPolicy, TorchPolicy, adaptive_kl_coeff

__all__ = ["ActorCriticPolicy", "TorchPolicy", "adaptive_kl_coeff"]
