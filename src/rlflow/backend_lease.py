"""A shared lease on the flow backend: trainers start it when none runs and shut down only a
backend that trainers started, when the last of them stops.

A backend the user started (``rlflow.flow.init``) is used and never shut down by a trainer.
"""

from __future__ import annotations

import logging
from typing import Any

from rlflow import flow
from rlflow.errors import ConfigError
from rlflow.flow.backend import BACKENDS

__all__ = ["acquire_backend", "release_backend"]

logger = logging.getLogger(__name__)

_lease_backend: str | None = None
_lease_users = 0


def acquire_backend(backend: str | None, address: str | None) -> bool:
    """Make sure the wanted backend runs; True if the caller now holds a share of it (and must
    call `release_backend` once)."""
    global _lease_backend, _lease_users
    if backend not in (None, *BACKENDS):
        raise ConfigError(f"Trainer(backend={backend!r}): must be one of {BACKENDS}")
    if address is not None and backend == "local":
        raise ConfigError(f"Trainer(address={address!r}) needs backend='ray', not 'local'")
    if flow.is_initialized():
        current = flow.backend_name()
        if backend in (None, current):
            if address is not None:
                logger.info("backend %r is running already; address=%r unused", current, address)
            if _lease_backend == current:
                _lease_users += 1
                return True
            return False
    name = backend or "ray"
    kwargs: dict[str, Any] = {"address": address} if address else {}
    flow.init(name, **kwargs)
    _lease_backend, _lease_users = name, 1
    return True


def release_backend() -> None:
    """Give back one share; the last one shuts the backend down if a lease started it."""
    global _lease_backend, _lease_users
    _lease_users -= 1
    if _lease_users > 0:
        return
    if flow.is_initialized() and flow.backend_name() == _lease_backend:
        flow.shutdown()
    _lease_backend, _lease_users = None, 0
