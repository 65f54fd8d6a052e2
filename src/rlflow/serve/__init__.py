"""External simulators: a run trained on episodes that another process steps and reports.

- `PolicyServer` (``rlflow serve``): an HTTP server whose clients start episodes, ask for
  actions, log rewards and end episodes (the JSON protocol: `rlflow.serve.server`); the run
  samples an `rlflow.serve.env.ExternalEnv` whose steps are those requests, so any algorithm
  trains on them with the weights it has now.
- `PolicyClient`: the client, pure Python and the standard library (`rlflow.serve.client`).

Nothing here is imported until used: the client needs neither numpy nor torch.
"""

from typing import TYPE_CHECKING

from rlflow.lazy import lazy_exports

if TYPE_CHECKING:
    from rlflow.serve.client import PolicyClient, ServeError
    from rlflow.serve.env import ENV_ID, ExternalEnv
    from rlflow.serve.server import DEFAULT_PORT, PROTOCOL_VERSION, PolicyServer

__all__ = [
    "DEFAULT_PORT",
    "ENV_ID",
    "PROTOCOL_VERSION",
    "ExternalEnv",
    "PolicyClient",
    "PolicyServer",
    "ServeError",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "PolicyClient": "client",
        "ServeError": "client",
        "ENV_ID": "env",
        "ExternalEnv": "env",
        "DEFAULT_PORT": "server",
        "PROTOCOL_VERSION": "server",
        "PolicyServer": "server",
    },
)
