"""Task distributions for meta-RL (`TaskSettableEnv`) and MAML's 2-D point navigation.

Reference: Finn et al., "Model-Agnostic Meta-Learning for Fast Adaptation of Deep Networks"
(ICML 2017), section 5.3, "2D Navigation": a point agent starts at the origin and must reach a
goal drawn uniformly from the unit square [-0.5, 0.5]^2; it acts by velocity clipped to
[-0.1, 0.1] per coordinate; the reward is the negative distance to the goal; an episode ends
within 0.01 of the goal or after a horizon of 100 steps.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, TypeVar, runtime_checkable

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from rlflow.checks import check_int
from rlflow.errors import ConfigError

logger = logging.getLogger(__name__)

TaskT = TypeVar("TaskT")


@runtime_checkable
class TaskSettableEnv(Protocol[TaskT]):
    """An env drawn from a task distribution: the meta-learner samples tasks and sets one.

    The driver samples a list of tasks from one env and sends one to each rollout worker,
    which calls `set_task` before its inner-loop episodes.
    """

    def sample_tasks(self, n: int) -> list[TaskT]:
        """Draw ``n`` tasks i.i.d. from the task distribution (from the env's task generator)."""
        ...

    def set_task(self, task: TaskT) -> None:
        """Make ``task`` the current task; it takes effect at the next reset."""
        ...

    def get_task(self) -> TaskT:
        """The current task."""
        ...


class PointNavTask(NamedTuple):
    """A `PointNavigation2D` task: the goal position."""

    goal_x: float
    """x of the goal, in [-0.5, 0.5] for sampled tasks."""
    goal_y: float
    """y of the goal, in [-0.5, 0.5] for sampled tasks."""


class PointNavigation2D(gym.Env[npt.NDArray[np.float32], npt.NDArray[np.float32]]):
    """MAML's 2-D navigation (Finn et al. 2017, section 5.3), a `TaskSettableEnv`.

    Observation: the agent's position ``(x, y)``, float32, ``(0, 0)`` after a reset. Action: a
    velocity ``(dx, dy)``, clipped to [-``max_speed``, ``max_speed``] per coordinate before it
    is added to the position. Reward: minus the Euclidean distance from the new position to the
    goal. The episode terminates when that distance is below ``goal_radius`` and is truncated
    after ``horizon`` steps. Tasks are goals drawn uniformly from [-0.5, 0.5]^2 by a task
    generator seeded with ``seed``; without ``task`` the current task is the first one that
    `sample_tasks` draws from a fresh env with this ``seed`` (drawn apart: the stream is not
    shifted).

    Example:
        >>> env = PointNavigation2D(PointNavTask(0.3, 0.4))
        >>> env.reset()[0].tolist()
        [0.0, 0.0]
        >>> round(env.step([0.5, 0.0])[1], 6)  # moves to (0.1, 0): distance sqrt(0.04 + 0.16)
        -0.447214
    """

    def __init__(
        self,
        task: PointNavTask | Sequence[float] | None = None,
        *,
        seed: int | None = None,
        horizon: int = 100,
        max_speed: float = 0.1,
        goal_radius: float = 0.01,
    ) -> None:
        """Make the env; ``seed`` seeds the task generator used by `sample_tasks`."""
        check_int(horizon, "PointNavigation2D: horizon", low=1)
        if not max_speed > 0:
            raise ConfigError(f"PointNavigation2D: max_speed={max_speed!r} must be > 0")
        if not goal_radius >= 0:
            raise ConfigError(f"PointNavigation2D: goal_radius={goal_radius!r} must be >= 0")
        self.horizon = horizon
        """Steps after which an episode is truncated (100 in the paper)."""
        self.max_speed = max_speed
        """Largest step per coordinate (0.1 in the paper)."""
        self.goal_radius = goal_radius
        """Distance to the goal that ends the episode (0.01 in the paper)."""
        self.observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = spaces.Box(-max_speed, max_speed, (2,), np.float32)
        self._task_rng = np.random.default_rng(seed)
        # A generator of its own, so that the default task does not shift `sample_tasks`.
        first = _uniform_goals(np.random.default_rng(seed), 1)[0]
        self._task = first if task is None else _as_task(task)
        self._position = np.zeros(2, dtype=np.float64)
        self._t = 0

    def sample_tasks(self, n: int) -> list[PointNavTask]:
        """Draw ``n`` goals uniformly from [-0.5, 0.5]^2 with the env's task generator."""
        check_int(n, "PointNavigation2D.sample_tasks: n", low=0)
        return _uniform_goals(self._task_rng, n)

    def set_task(self, task: PointNavTask | Sequence[float]) -> None:
        """Make ``task`` (a goal ``(x, y)``) current; the agent keeps its position until reset."""
        self._task = _as_task(task)

    def get_task(self) -> PointNavTask:
        """The current goal."""
        return self._task

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[npt.NDArray[np.float32], dict[str, Any]]:
        """Put the agent at the origin; ``info["task"]`` is the current task."""
        super().reset(seed=seed)
        self._position = np.zeros(2, dtype=np.float64)
        self._t = 0
        return self._position.astype(np.float32), {"task": self._task}

    def step(
        self, action: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        """Move by the clipped velocity; reward is minus the new distance to the goal."""
        velocity = np.asarray(action, dtype=np.float64)
        if velocity.shape != (2,):
            raise ConfigError(
                f"PointNavigation2D.step: action has shape {velocity.shape}, expected (2,)"
            )
        self._position = self._position + np.clip(velocity, -self.max_speed, self.max_speed)
        self._t += 1
        distance = float(np.hypot(*(self._position - np.asarray(self._task))))
        terminated = distance < self.goal_radius
        truncated = not terminated and self._t >= self.horizon
        return self._position.astype(np.float32), -distance, terminated, truncated, {}


def _uniform_goals(rng: np.random.Generator, n: int) -> list[PointNavTask]:
    """``n`` goals drawn uniformly from [-0.5, 0.5]^2."""
    return [PointNavTask(float(x), float(y)) for x, y in rng.uniform(-0.5, 0.5, size=(n, 2))]


def _as_task(task: PointNavTask | Sequence[float]) -> PointNavTask:
    """Check and convert a goal ``(x, y)`` of finite numbers to a `PointNavTask`."""
    goal = np.asarray(task, dtype=np.float64)
    if goal.shape != (2,) or not np.isfinite(goal).all():
        raise ConfigError(
            f"PointNavigation2D: task {task!r} must be a goal (x, y) of two finite numbers, "
            "e.g. PointNavTask(0.1, -0.3)"
        )
    return PointNavTask(float(goal[0]), float(goal[1]))
