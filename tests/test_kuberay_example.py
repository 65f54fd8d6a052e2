"""The KubeRay example (``examples/kuberay/rayjob.yaml``) against KubeRay's RayJob schema.

No Kubernetes here: the manifest is checked against the ``v1`` schema of KubeRay's RayJob CRD
(``examples/kuberay/rayjob.schema.json``, trimmed to the manifest's paths by
``examples/kuberay/trim_schema.py``), strictly: a key a level does not declare is an error, as
``kubectl apply --validate=strict`` makes it. Its entrypoint is an ``rlflow train`` command line
that this rlflow's parser and config take.
"""

from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from rlflow.cli.parser import build_parser
from rlflow.cli.resolve import resolve_run

pytestmark = pytest.mark.timeout(60)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "kuberay"


def strict(schema: Any) -> Any:
    """``schema`` with every object that lists its properties closed to others (Kubernetes'
    strict field validation), unless it keeps unknown fields."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    preserve = schema.get("x-kubernetes-preserve-unknown-fields")
    if "properties" in schema and "additionalProperties" not in schema and not preserve:
        out["additionalProperties"] = False
    return out


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads((EXAMPLE / "rayjob.schema.json").read_text())
    return jsonschema.Draft7Validator(strict(schema))


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    return yaml.safe_load((EXAMPLE / "rayjob.yaml").read_text())  # type: ignore[no-any-return]


def errors(validator: jsonschema.protocols.Validator, document: Any) -> list[str]:
    found = validator.iter_errors(document)
    return sorted(f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in found)


def test_the_rayjob_example_is_valid(validator: Any, manifest: dict[str, Any]) -> None:
    assert errors(validator, manifest) == []
    cluster = manifest["spec"]["rayClusterSpec"]
    assert cluster["enableInTreeAutoscaling"] is True  # the run's requests reach an autoscaler


def test_the_schema_refuses_what_kubernetes_would(validator: Any, manifest: dict[str, Any]) -> None:
    """The check can fail: a misspelt key, a missing required key, a wrong type, another kind."""
    cases = {
        "spec": ("shutdownAfterJobFinish", True),  # misspelt: not a RayJob field
        "rayClusterSpec": ("headGroupSpec", None),  # required
        "worker": ("maxReplicas", "four"),  # an integer
        "top": ("kind", "RayCluster"),
    }
    for where, (key, value) in cases.items():
        bad = copy.deepcopy(manifest)
        target = {
            "spec": bad["spec"],
            "rayClusterSpec": bad["spec"]["rayClusterSpec"],
            "worker": bad["spec"]["rayClusterSpec"]["workerGroupSpecs"][0],
            "top": bad,
        }[where]
        if value is None:
            del target[key]
        else:
            target[key] = value
        assert errors(validator, bad), (where, key)


def test_the_entrypoint_is_an_rlflow_train_command_this_rlflow_takes(
    manifest: dict[str, Any],
) -> None:
    words = shlex.split(manifest["spec"]["entrypoint"])
    assert words[:2] == ["rlflow", "train"]
    args = build_parser().parse_args(words[1:])
    assert args.address == "auto"  # the job's driver joins the job's cluster
    config = resolve_run(args).config  # the command's own resolution: bad input raises
    assert config.elastic()
    worker = manifest["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    # The worker group can grow to hold every worker the run asks for, one per pod.
    assert worker["maxReplicas"] >= config.num_workers
    assert worker["minReplicas"] >= config.min_workers
