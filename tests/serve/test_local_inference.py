"""Local inference (``PolicyClient(inference="local")``): the client acts with the server's
exported policy and reports its actions (``log_action``); the run records those actions, with
their log-likelihood under its own policy."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlflow import Trainer
from rlflow.algorithms import PGConfig
from rlflow.data.sample_batch import ACTION_DIST_INPUTS, ACTIONS, LOGP
from rlflow.serve import PolicyClient, PolicyServer, ServeError

pytestmark = pytest.mark.timeout(120)

ENV = gym.make("CartPole-v1")


@pytest.fixture
def served() -> Iterator[tuple[PolicyServer, Trainer]]:
    with PolicyServer(ENV.observation_space, ENV.action_space, port=0) as server:
        config = server.configure(PGConfig(seed=0, rollout_fragment_length=50, train_batch_size=50))
        with Trainer("pg", config=config, backend="local") as trainer:
            server.serve_policy(trainer.export_policy)
            yield server, trainer


def _play(client: PolicyClient, steps: int, choose: object = None) -> list[object]:
    """``steps`` CartPole steps through ``client``; with ``choose``, that action logged at every
    step instead of asking for one. The actions taken, in order."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=3)
    episode, taken = client.start_episode(), []
    for _ in range(steps):
        if choose is None:
            action = client.get_action(episode, obs)
        else:
            action = choose
            client.log_action(episode, obs, action)
        taken.append(action)
        obs, reward, terminated, truncated, _ = env.step(action)
        client.log_returns(episode, reward)
        if terminated or truncated:
            client.end_episode(episode, obs, truncated=not terminated)
            obs, _ = env.reset()
            episode = client.start_episode()
    return taken


def test_logged_actions_replace_the_policys_with_their_log_likelihood(
    served: tuple[PolicyServer, Trainer],
) -> None:
    server, trainer = served
    client = PolicyClient(server.address)
    player = threading.Thread(target=_play, args=(client, 60, 1), daemon=True)
    player.start()
    batch = trainer.workers.local_worker().sample()
    player.join(timeout=30)
    assert batch.count == 50
    assert (batch[ACTIONS] == 1).all()  # the policy alone would pick both
    expected = torch.log_softmax(torch.as_tensor(batch[ACTION_DIST_INPUTS]), -1)[:, 1]
    np.testing.assert_allclose(batch[LOGP], expected.numpy(), rtol=1e-5)
    client.close()


def test_a_local_client_acts_with_the_servers_current_policy(
    served: tuple[PolicyServer, Trainer],
) -> None:
    server, trainer = served
    client = PolicyClient(server.address, inference="local", update_interval_s=0.0, seed=1)
    player = threading.Thread(target=_play, args=(client, 120), daemon=True)
    player.start()
    result = trainer.train()
    player.join(timeout=30)
    assert result["num_env_steps_sampled"] >= 50
    assert server.info()["actions_served"] >= 50
    # The client's copy is the trainer's policy: the same greedy actions.
    local = client.local_policy()  # fetched again (update_interval_s 0): after the update
    obs = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    mine = [local.compute_single_action(o) for o in obs]
    theirs = [trainer.compute_single_action(o, explore=False) for o in obs]
    assert mine == theirs
    client.close()


def test_bad_logged_action_and_no_served_policy() -> None:
    with PolicyServer(ENV.observation_space, ENV.action_space, port=0) as server:
        client = PolicyClient(server.address)
        episode = client.start_episode()
        with pytest.raises(ServeError, match="400: log_action: action 2 is not an integer in"):
            client.log_action(episode, [0, 0, 0, 0], 2)
        with pytest.raises(ServeError, match="404: policy: this server does not serve"):
            PolicyClient(server.address, inference="local").local_policy()
        client.close()
    with pytest.raises(ValueError, match="inference 'gpu'"):
        PolicyClient("127.0.0.1:1", inference="gpu")
