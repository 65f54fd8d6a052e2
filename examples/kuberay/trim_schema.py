"""Write the part of KubeRay's RayJob schema that ``rayjob.yaml`` uses, for its test.

KubeRay's RayJob CRD (``ray-operator/config/crd/bases/ray.io_rayjobs.yaml`` of
github.com/ray-project/kuberay, Apache-2.0) is 1.4 MB, most of it the Kubernetes pod template
twice over. This keeps the ``v1`` version's ``openAPIV3Schema`` along the paths the manifest
uses, whole (types, formats, enums, patterns, required keys, defaults), and of every other
property only its type, so that the test (``tests/test_kuberay_example.py``) still sees every
key a level allows and refuses one that is not there, as ``kubectl apply --validate=strict``
would. Run it again when the manifest or the CRD changes::

    python examples/kuberay/trim_schema.py ray.io_rayjobs.yaml examples/kuberay/rayjob.yaml \\
        --source "ray-project/kuberay@<commit>" > examples/kuberay/rayjob.schema.json
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import yaml

KEEP = ("type", "format", "enum", "pattern", "required", "default", "nullable", "anyOf")
KEEP_X = ("x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields")


def stub(schema: dict[str, Any]) -> dict[str, Any]:
    """A property the manifest does not use: its type only (any type when it has none)."""
    out = {k: schema[k] for k in ("type", "x-kubernetes-int-or-string") if k in schema}
    return out or {}


def trim(schema: dict[str, Any], value: Any) -> dict[str, Any]:
    """``schema`` along ``value`` (a part of the manifest): whole where ``value`` goes."""
    out = {k: schema[k] for k in (*KEEP, *KEEP_X) if k in schema}
    if "properties" in schema:
        given = value if isinstance(value, dict) else {}
        out["properties"] = {
            name: trim(sub, given[name]) if name in given else stub(sub)
            for name, sub in schema["properties"].items()
        }
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        values = list(value.values()) if isinstance(value, dict) else []
        out["additionalProperties"] = trim_all(additional, values)
    elif additional is not None:
        out["additionalProperties"] = additional
    if isinstance(schema.get("items"), dict):
        out["items"] = trim_all(schema["items"], value if isinstance(value, list) else [])
    return out


def trim_all(schema: dict[str, Any], values: list[Any]) -> dict[str, Any]:
    """``schema`` along every one of ``values`` (the items of a list, the values of a map)."""
    if not values:
        return stub(schema)
    merged: dict[str, Any] = {}
    for value in values:
        merged = merge(merged, trim(schema, value))
    return merged


def merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two trims of one schema: a property kept whole in either stays whole."""
    out = {**a, **b}
    if "properties" in a and "properties" in b:
        out["properties"] = {
            name: merge(a["properties"][name], b["properties"][name]) for name in a["properties"]
        }
    for key in ("items", "additionalProperties"):
        if isinstance(a.get(key), dict) and isinstance(b.get(key), dict):
            out[key] = merge(a[key], b[key])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("crd", help="KubeRay's ray.io_rayjobs.yaml")
    parser.add_argument("manifest", help="the RayJob manifest whose paths to keep")
    parser.add_argument("--source", required=True, help="where the CRD came from (repo@commit)")
    args = parser.parse_args(argv)
    with open(args.crd) as f:
        crd = yaml.safe_load(f)
    with open(args.manifest) as f:
        manifest = yaml.safe_load(f)
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = trim(version["schema"]["openAPIV3Schema"], manifest)
    # What Kubernetes matches a manifest to this CRD by: its group and version, and its kind.
    properties = schema["properties"]
    properties["apiVersion"]["enum"] = [f"{crd['spec']['group']}/{version['name']}"]
    properties["kind"]["enum"] = [crd["spec"]["names"]["kind"]]
    schema["required"] = sorted({*schema.get("required", ()), "apiVersion", "kind"})
    schema = {
        "$comment": (
            f"The v1 openAPIV3Schema of KubeRay's RayJob CRD ({args.source}, "
            "ray-operator/config/crd/bases/ray.io_rayjobs.yaml; Apache-2.0, "
            "https://github.com/ray-project/kuberay), trimmed to the paths of rayjob.yaml by "
            "trim_schema.py: other properties keep only their type; apiVersion and kind are "
            "the CRD's group/version and kind."
        ),
        **schema,
    }
    json.dump(schema, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
