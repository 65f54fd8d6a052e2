"""`Sampler`: the one env-stepping loop of rlflow, for training and for evaluation.

A sampler steps the envs of one rollout worker with its policy map. Training reads fragments
(`Sampler.sample`: step every env ``length`` times, record the rows, postprocess them with the
right bootstrap values); evaluation reads whole episodes (`Sampler.run_episodes`: the same steps
on fresh, seeded envs, recording nothing, greedy or stochastic). Both loops call the same
``_step``, so an action is converted (`rlflow.envs.vector.env_action`), an env stepped and an
episode counted the same way whether the experience trains a policy or measures it.

Two samplers fill in ``_step``:

- `rlflow.workers.vector_sampler.VectorSampler`: single-agent envs, one `rlflow.envs.VectorEnv`,
  one batched inference per step, rows written into numpy buffers allocated once;
- `rlflow.workers.multi_agent_sampler.MultiAgentSampler`: multi-agent envs (one batched
  inference per policy per step, rows kept per agent).

Both take a `SamplerSpec`: the settings a rollout worker builds once from its config (its
evaluation runs a variant of it); `rlflow.workers.rollout_worker.make_sampler` picks the sampler
for an env.

Observation filters (``observation_filter``, `rlflow.filters`): a sampler given filters passes
every observation an env returns through its policy's filter once, as it arrives (the reset
observations, each step's, and the last one of an episode that ended), and both acts on and
records the filtered ones; without filters (``"NoFilter"``) nothing is added to a step.
"""

from __future__ import annotations

import abc
import inspect
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import gymnasium as gym

from rlflow.checks import check_int
from rlflow.config import DEFAULT_POLICY_ID
from rlflow.config.self_play import EpisodeInfo
from rlflow.data import MultiAgentBatch, SampleBatch
from rlflow.envs.flatten import env_observation_space
from rlflow.envs.multi_agent import MultiAgentEnv
from rlflow.envs.vector import EpisodeStat
from rlflow.errors import ConfigError

__all__ = [
    "Sampler",
    "SamplerSpec",
    "agent_policy_map",
    "mapping_takes_episode",
    "as_multi_agent_env",
    "env_observation_spaces",
    "is_multi_agent_env",
    "policy_spaces",
]

MappingFn = Callable[..., str]
"""``policy_mapping_fn``: ``fn(agent_id)``, or ``fn(agent_id, episode)`` (`EpisodeInfo`)."""


class SamplerSpec(NamedTuple):
    """The settings of a `Sampler`: which envs it builds and how it steps them.

    A rollout worker builds its spec once, from its config; its evaluation derives a variant
    (``spec._replace(num_envs=1, seed=..., explore=...)``). The live parts a sampler works
    with (the policies, the observation filters, the episode ids) are passed beside it.
    """

    creator: Callable[[], Any]
    """Builds one env: a Gymnasium env, or a `MultiAgentEnv` / PettingZoo env when
    ``multi_agent``."""
    num_envs: int
    """Envs stepped together (>= 1; ``num_envs_per_worker`` in training)."""
    multi_agent: bool
    """Whether ``creator``'s env is multi-agent (`is_multi_agent_env`): a `MultiAgentSampler`
    steps it, else a `VectorSampler`."""
    seed: int | None
    """Env ``j`` is first reset with ``seed + j`` (None: unseeded)."""
    explore: bool = True
    """Sample actions from the policies' distributions (True) or take the greedy ones."""
    mapping_fn: MappingFn | None = None
    """Multi-agent: agent id -> policy id (``policy_mapping_fn``; None: the only policy)."""
    restart_failed: bool = False
    """Rebuild an env that raises (``restart_failed_sub_environments``) instead of failing."""
    on_nonfinite: str = "raise"
    """A NaN or infinite reward or observation: ``"raise"`` a `NonFiniteError`, or ``"skip"``
    (drop the episode, count it); see `rlflow.workers.nonfinite`."""
    vector_env: str = "rlflow"
    """Single-agent: the env engine (``vector_env``, `rlflow.envs.gym_vector.make_vector_env`)."""
    env_id: str | None = None
    """The env's name in messages (None: its Gymnasium id or class name)."""
    worker_index: int | None = None
    """The index of the rollout worker stepping the envs, for messages (None: no worker)."""


class Sampler(abc.ABC):
    """Steps a worker's envs with its policies: fragments for training, episodes for evaluation.

    Args:
        spec: the settings (`SamplerSpec`); ``spec.explore`` acts by sampling from the
            policies' action distributions (training, and stochastic evaluation), False by
            their deterministic (greedy) actions.

    Subclasses implement ``_start`` (build and reset the envs on the first call), ``_step``
    (one step of every env), ``_take_fragment`` (the postprocessed rows since the last one) and
    the env access below.
    """

    def __init__(self, spec: SamplerSpec) -> None:
        """Keep the settings; envs are built by the subclass."""
        self.spec = spec
        """The settings this sampler was built with."""
        self._env_restarts_popped = 0
        self._nonfinite_episodes = 0  # episodes dropped for a NaN/inf, since the last pop

    def sample(
        self, length: int, *, preempt: Callable[[int], bool] | None = None
    ) -> SampleBatch | MultiAgentBatch:
        """Training: step every env ``length`` times; return the postprocessed rows.

        ``preempt(steps)`` is asked after each step but the last (``steps``: how many each env
        has taken); when it answers True the fragment ends there, shorter, postprocessed like
        a full one (V of the next observations bootstraps its end): DD-PPO's preemption of a
        straggler (`rlflow.algorithms.ddppo`). The envs go on from there in the next fragment.
        """
        self._start(length)
        steps = length
        for t in range(length):
            self._step(t, record=True)
            if preempt is not None and t + 1 < length and preempt(t + 1):
                steps = t + 1
                break
        return self._take_fragment(steps)

    def run_episodes(self, num_episodes: int) -> list[EpisodeStat]:
        """Evaluation: step until ``num_episodes`` episodes have ended, recording no rows.

        Returns the first ``num_episodes`` episodes in the order they ended. Meant for a fresh
        sampler (its envs reset with its seed); an episode in progress at the end is dropped.
        With ``explore=True`` the actions draw from the policies' generators.
        """
        num_episodes = check_int(num_episodes, "Sampler.run_episodes: num_episodes", low=1)
        self._start(0)
        episodes: list[EpisodeStat] = []
        while len(episodes) < num_episodes:
            self._step(0, record=False)
            episodes.extend(self.pop_episode_stats())
        return episodes[:num_episodes]

    @abc.abstractmethod
    def _start(self, length: int) -> None:
        """Build and reset the envs on the first call; make room for ``length`` rows."""

    @abc.abstractmethod
    def _step(self, t: int, *, record: bool) -> None:
        """Act in and step every env once; with ``record`` keep the rows as row ``t``."""

    @abc.abstractmethod
    def _take_fragment(self, steps: int) -> SampleBatch | MultiAgentBatch:
        """The rows recorded since the last call (``steps`` steps of each env), postprocessed."""

    @property
    @abc.abstractmethod
    def envs(self) -> list[Any]:
        """The envs, in order (built first if needed)."""

    @abc.abstractmethod
    def pop_episode_stats(self) -> list[EpisodeStat]:
        """Episodes finished since the last call, in the order they ended."""

    @property
    @abc.abstractmethod
    def num_env_restarts(self) -> int:
        """Envs rebuilt after they raised (``restart_failed``) since the envs were built."""

    def pop_env_restarts(self) -> int:
        """Env rebuilds since the last call (a count to add to a run's ``num_env_restarts``)."""
        total = self.num_env_restarts
        new, self._env_restarts_popped = max(total - self._env_restarts_popped, 0), total
        return new

    def pop_nonfinite_episodes(self) -> int:
        """Episodes dropped for a NaN or infinite reward or observation (``on_nonfinite="skip"``)
        since the last call (a count to add to a run's ``num_nonfinite_episodes``)."""
        count, self._nonfinite_episodes = self._nonfinite_episodes, 0
        return count

    @abc.abstractmethod
    def get_state(self) -> Any:
        """The envs and episodes in progress (picklable)."""

    @abc.abstractmethod
    def set_state(self, state: Any) -> None:
        """Restore :meth:`get_state`."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close every env."""


def mapping_takes_episode(mapping_fn: MappingFn | None) -> bool:
    """Whether ``mapping_fn`` takes the episode as its second argument (two positional
    parameters or ``*args``).

    >>> mapping_takes_episode(lambda agent: "p"), mapping_takes_episode(lambda agent, ep: "p")
    (False, True)
    """
    if mapping_fn is None:
        return False
    try:
        params = inspect.signature(mapping_fn).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: one argument
        return False
    kinds = [p.kind for p in params]
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(k in positional for k in kinds) >= 2 or inspect.Parameter.VAR_POSITIONAL in kinds


def agent_policy_map(
    agents: list[str],
    mapping_fn: MappingFn | None,
    policy_ids: list[str],
    episode: EpisodeInfo | None = None,
    *,
    takes_episode: bool | None = None,
) -> dict[str, str]:
    """``{agent: policy id}`` for ``agents``; `ConfigError` if the function names an unknown id.

    A two-argument ``mapping_fn`` also gets ``episode`` (None outside an episode: asking which
    policy's spaces an agent gives); ``takes_episode`` is `mapping_takes_episode`'s answer
    when the caller has it (None: found here)."""
    with_episode = mapping_takes_episode(mapping_fn) if takes_episode is None else takes_episode
    out: dict[str, str] = {}
    for agent in agents:
        if mapping_fn is None:
            pid = policy_ids[0]
        else:
            pid = mapping_fn(agent, episode) if with_episode else mapping_fn(agent)
        if pid not in policy_ids:
            raise ConfigError(
                f"policy_mapping_fn({agent!r}) returned {pid!r}, which is not a policy of this "
                f"run; the policies are {policy_ids}"
            )
        out[agent] = pid
    return out


def as_multi_agent_env(env: Any) -> MultiAgentEnv:
    """``env`` itself if it is a `MultiAgentEnv`, else a PettingZoo env adapted to one."""
    if isinstance(env, MultiAgentEnv):
        return env
    from rlflow.envs.multi_agent import from_pettingzoo

    return from_pettingzoo(env)


def is_multi_agent_env(env: Any) -> bool:
    """True for a `MultiAgentEnv` or a PettingZoo env (anything not a Gymnasium env that has
    ``possible_agents``)."""
    if isinstance(env, MultiAgentEnv):
        return True
    return not isinstance(env, gym.Env) and hasattr(env, "possible_agents")


def policy_spaces(
    probe: Any,
    specs: Mapping[str, Any],
    mapping_fn: MappingFn | None,
    env_name: Any,
    *,
    multi_agent: bool,
) -> dict[str, tuple[Any, Any]]:
    """``{policy id: (observation space, action space)}``: a spec's own spaces, else those of
    the first agent of the env ``probe`` that maps to the policy (to the policy it is a
    snapshot of, for a ``snapshot_of`` spec; `ConfigError` if none). The mapping is asked
    outside an episode."""
    if not multi_agent:
        if list(specs) != [DEFAULT_POLICY_ID]:
            raise ConfigError(
                f"policies={sorted(specs)}: env {env_name!r} is single-agent, so its "
                f"one policy must be {DEFAULT_POLICY_ID!r} (give a multi-agent env, e.g. "
                "'multi_cartpole', to train several policies)"
            )
        spec = specs[DEFAULT_POLICY_ID]
        return {
            DEFAULT_POLICY_ID: (
                spec.observation_space or probe.observation_space,
                spec.action_space or probe.action_space,
            )
        }
    env = as_multi_agent_env(probe)
    policy_of = agent_policy_map(list(env.possible_agents), mapping_fn, list(specs))
    out: dict[str, tuple[Any, Any]] = {}
    for pid, spec in specs.items():
        source = spec.snapshot_of or pid  # a snapshot has the spaces of what it copies
        agent = next((a for a, p in policy_of.items() if p == source), None)
        obs_space, act_space = spec.observation_space, spec.action_space
        if agent is not None:
            obs_space = obs_space or env.observation_spaces[agent]
            act_space = act_space or env.action_spaces[agent]
        if obs_space is None or act_space is None:
            raise ConfigError(
                f"policy {pid!r}: no agent of {env_name!r} (possible agents "
                f"{list(env.possible_agents)}) maps to it, so give its observation_space "
                "and action_space in its PolicySpec"
            )
        if spec.observation_space is None and spec.action_space is None:
            _check_same_spaces(env, pid, [a for a, p in policy_of.items() if p == source])
        out[pid] = (obs_space, act_space)
    return out


def env_observation_spaces(
    probe: Any, specs: Mapping[str, Any], mapping_fn: MappingFn | None, *, multi_agent: bool
) -> dict[str, Any]:
    """``{policy id: the space of its env's own observations}`` for the policies whose
    observations the env creator flattens (`rlflow.envs.flatten.env_observation_space`: a
    Dict, Tuple, MultiDiscrete or MultiBinary space, PettingZoo's ``{"observation",
    "action_mask"}`` among them), read off ``probe`` as `policy_spaces` reads the flat ones;
    policies with spaces of their own, or observations that are not flattened, are left out.
    An export records it, so that a loaded policy takes the env's observations as they are."""
    if not multi_agent:
        space = env_observation_space(probe)
        spec = specs.get(DEFAULT_POLICY_ID)
        if space is None or spec is None or spec.observation_space is not None:
            return {}
        return {DEFAULT_POLICY_ID: space}
    agents = list(getattr(probe, "possible_agents", []))
    policy_of = agent_policy_map(agents, mapping_fn, list(specs))
    out: dict[str, Any] = {}
    for pid, spec in specs.items():
        source = spec.snapshot_of or pid
        agent = next((a for a, p in policy_of.items() if p == source), None)
        space = None if agent is None else env_observation_space(probe, agent)
        if space is not None and spec.observation_space is None:
            out[pid] = space
    return out


def _check_same_spaces(env: Any, pid: str, agents: list[str]) -> None:
    """`ConfigError` naming the agents of ``env`` that map to policy ``pid`` but differ in
    their observation or action spaces (one network cannot take both)."""
    first = agents[0] if agents else None
    for agent in agents[1:]:
        for kind, of in (("observation", env.observation_spaces), ("action", env.action_spaces)):
            if of[agent] != of[first]:
                raise ConfigError(
                    f"policy {pid!r}: agents {first!r} and {agent!r} both map to it but their "
                    f"{kind} spaces differ ({of[first]} vs {of[agent]}); give them policies of "
                    "their own (policies and policy_mapping_fn, e.g. one policy per agent: "
                    "policies={agent: PolicySpec()} and policy_mapping_fn=lambda agent: agent)"
                )
