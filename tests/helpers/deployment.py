"""The deployment files as the tests read them: the Kubernetes manifests under deploy/k8s, the
Dagster chart's values, and the object-store policies their Secrets name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).parent.parent.parent  # the repository
K8S = ROOT / "deploy" / "k8s"
HELM_VALUES = K8S / "dagster-values.yaml"
SETTINGS = "ductwork-settings"
POLICY = "ductwork/object-store-policy"  # a Secret's annotation: its keys' policy document


def manifests() -> list[tuple[str, dict[str, Any]]]:
    """Every Kubernetes object in deploy/k8s (the Helm values file aside), with its file."""
    found = []
    for path in sorted(K8S.glob("*.yaml")):
        if path != HELM_VALUES:
            found += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return found


def every(kind: str) -> list[dict[str, Any]]:
    """Every object of one kind."""
    return [doc for _, doc in manifests() if doc["kind"] == kind]


def the(kind: str, name: str) -> dict[str, Any]:
    """The one object of that kind and name."""
    matches = [doc for doc in every(kind) if doc["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} found"
    return matches[0]


def secret_values(name: str) -> dict[str, str]:
    """The entries of one Secret template."""
    secret = the("Secret", name)
    return {**secret.get("data", {}), **secret.get("stringData", {})}


def config() -> dict[str, str]:
    """The settings ConfigMap every ductwork pod reads."""
    return the("ConfigMap", SETTINGS)["data"]


def helm_values() -> dict[str, Any]:
    """The values given to Dagster's Helm chart."""
    return yaml.safe_load(HELM_VALUES.read_text())


def policy_of(secret: str) -> dict[str, Any] | None:
    """The object-store policy document a Secret's keys are for (its annotation names it)."""
    annotations = the("Secret", secret)["metadata"].get("annotations", {})
    if POLICY not in annotations:
        return None
    return json.loads((ROOT / annotations[POLICY]).read_text(encoding="utf-8"))
