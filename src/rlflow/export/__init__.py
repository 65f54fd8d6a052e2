"""Use a trained policy outside training: export it, load it anywhere, act.

``rlflow.Trainer.export_policy(path)`` (through :func:`export_policy`) writes one policy as a
directory: ``policy.json`` (spaces, model options, algorithm and policy class, env and
preprocessing) and ``weights.pt`` (tensors only). :func:`load_policy` (also
``rlflow.load_policy``) rebuilds it in a plain process, with no Ray and no workers, as a
:class:`LoadedPolicy` whose greedy actions are the trainer's. What is exported is the policy's
actor (`rlflow.models.actors.ExportableActor`): a policy class chooses its own with
``export_model()``.

Modules: `rlflow.export.writer` (what is written), `rlflow.export.files` (the files, safe
loading), `rlflow.export.spaces` (spaces as JSON), `rlflow.export.loaded` (the loaded
policy) and `rlflow.export.observations` (the env's own observations as the flat vectors the
network and the ONNX graph take).
"""

from rlflow.export.files import FORMAT, FORMAT_VERSION, SPEC_FILE, WEIGHTS_FILE
from rlflow.export.loaded import LoadedPolicy, load_policy
from rlflow.export.observations import EnvObservations, flat_observations
from rlflow.export.spaces import space_from_json, space_to_json
from rlflow.export.writer import actor_export, export_policy

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "SPEC_FILE",
    "WEIGHTS_FILE",
    "EnvObservations",
    "LoadedPolicy",
    "actor_export",
    "export_policy",
    "flat_observations",
    "load_policy",
    "space_from_json",
    "space_to_json",
]
