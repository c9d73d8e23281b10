"""deploy/kubernetes is valid against the Kubernetes API schemas (bundled, offline) and says what we mean.

No cluster is available here, so the manifests are checked two ways: every resource against the
JSON Schemas of the Kubernetes API (``kubernetes-validate`` ships them; strict mode refuses unknown
fields, the usual typo), and our own rules (probes on /health, limits, the token from a Secret,
one worker per CPU of the limit). A broken manifest must fail both: tests below break one on purpose.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]
"""The oldest Kubernetes still commonly run, and the newest whose schemas the package bundles."""


def _resources() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    listed = kustomization["resources"]
    assert sorted(listed) == sorted(p.name for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")
    return [doc for name in listed for doc in yaml.safe_load_all((DEPLOY / name).read_text()) if doc]


def _validate(resource: dict[str, Any]) -> None:
    for version in VERSIONS:
        kubernetes_validate.validate(resource, version, strict=True)


def _deployment() -> dict[str, Any]:
    return next(r for r in _resources() if r["kind"] == "Deployment")


def _check_rules(deployment: dict[str, Any], service: dict[str, Any]) -> None:
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        check = container[probe]["httpGet"]
        assert check["path"] == "/health" and check["port"] in ports, probe
    limits, requests = container["resources"]["limits"], container["resources"]["requests"]
    assert {"cpu", "memory"} <= limits.keys() and {"cpu", "memory"} <= requests.keys()
    command = [*container["command"], *container["args"]]
    assert command[command.index("--workers") + 1] == str(limits["cpu"]), "one worker per CPU of the limit"
    assert command[command.index("--port") + 1] == str(ports["http"])
    (token,) = [e for e in container["env"] if e["name"] == "STATEKIT_TOKEN"]
    assert "value" not in token and token["valueFrom"]["secretKeyRef"]["key"]
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= set(ports)


def test_every_manifest_is_valid_against_the_kubernetes_schemas() -> None:
    resources = _resources()
    assert {r["kind"] for r in resources} == {"Deployment", "Service", "PodDisruptionBudget"}
    for resource in resources:
        _validate(resource)


def test_the_deployment_follows_our_rules() -> None:
    resources = _resources()
    service = next(r for r in resources if r["kind"] == "Service")
    _check_rules(_deployment(), service)


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("spec", "replicas"), "two"),
        (("spec", "template", "spec", "containers", 0, "livenessProbe", "periodSecond"), 5),
        (("spec", "template", "spec", "containers", 0, "ports", 0, "containerPort"), "8000"),
        (("spec", "strategy", "type"), ["Recreate"]),
    ],
    ids=["string-replicas", "misspelt-field", "string-port", "list-for-string"],
)
def test_an_invalid_manifest_is_refused(where: tuple[Any, ...], value: Any) -> None:
    broken = copy.deepcopy(_deployment())
    target = broken
    for key in where[:-1]:
        target = target.setdefault(key, {}) if isinstance(key, str) else target[key]
    target[where[-1]] = value
    with pytest.raises(kubernetes_validate.ValidationError):
        _validate(broken)


def test_a_deployment_breaking_our_rules_is_refused() -> None:
    service = next(r for r in _resources() if r["kind"] == "Service")
    for mutate in (
        lambda c: c.pop("readinessProbe"),
        lambda c: c["resources"].pop("limits"),
        lambda c: c["env"].__setitem__(0, {"name": "STATEKIT_TOKEN", "value": "in-the-clear"}),
        lambda c: c["args"].__setitem__(c["args"].index("--workers") + 1, "8"),
    ):
        broken = copy.deepcopy(_deployment())
        mutate(broken["spec"]["template"]["spec"]["containers"][0])
        with pytest.raises((AssertionError, KeyError)):
            _check_rules(broken, service)
