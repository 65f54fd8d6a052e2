"""Environment creation and in-process vector envs."""

from rlflow.envs.creator import EnvCreator, make_env_creator
from rlflow.envs.vector import EpisodeStat, VectorEnv, VectorStep

__all__ = ["EnvCreator", "EpisodeStat", "VectorEnv", "VectorStep", "make_env_creator"]
