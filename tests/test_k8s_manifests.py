"""The Kubernetes files under deploy/k8s hold what README.md's "Running on Kubernetes" says.

Every manifest is checked against the Kubernetes schemas (kubernetes-validate's bundled ones,
offline, rejecting unknown fields); the Helm values file is no manifest and is checked against
the chart keys it uses. The settings they carry must load as ductwork loads them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from ductwork.settings import ALL_GROUPS, PREFIX, HomeSettings, ServeSettings, load

ROOT = Path(__file__).parent.parent
K8S = ROOT / "deploy" / "k8s"
HELM_VALUES = K8S / "dagster-values.yaml"
KUBERNETES_VERSION = "1.30.0"
SETTINGS, SECRETS = "ductwork-settings", "ductwork-secrets"
# Settings that carry credentials, so they belong in the Secret only.
SECRET_SETTINGS = {"DUCTWORK_UPSTREAM_API_KEY", "DUCTWORK_RATE_LIMIT_URL"}


def manifests() -> list[tuple[str, dict[str, Any]]]:
    """Every Kubernetes object in deploy/k8s (the Helm values file aside), with its file."""
    found = []
    for path in sorted(K8S.glob("*.yaml")):
        if path != HELM_VALUES:
            found += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return found


def the(kind: str, name: str) -> dict[str, Any]:
    matches = [
        doc for _, doc in manifests() if doc["kind"] == kind and doc["metadata"]["name"] == name
    ]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} found"
    return matches[0]


def test_every_manifest_passes_the_kubernetes_schema_with_no_unknown_field() -> None:
    found = manifests()
    kinds = {doc["kind"] for _, doc in found}
    assert {"Deployment", "Service", "ConfigMap", "Secret", "PersistentVolumeClaim"} <= kinds
    for name, doc in found:
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{name} {doc['kind']}/{doc['metadata']['name']}: {exc.message}")


def test_the_schema_check_rejects_a_misspelt_field() -> None:
    deployment = the("Deployment", "ductwork-api")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def environment() -> dict[str, str]:
    """The variables the ConfigMap and the Secret give every pod."""
    config = the("ConfigMap", SETTINGS)["data"]
    secret = the("Secret", SECRETS)["stringData"]
    assert not set(config) & set(secret)
    return {**config, **secret}


def test_the_settings_are_ductworks_own_and_secrets_stay_in_the_secret() -> None:
    known = {PREFIX + name.upper() for group in ALL_GROUPS for name in group.model_fields}
    config = the("ConfigMap", SETTINGS)["data"]
    unknown = {name for name in environment() if name.startswith(PREFIX)} - known
    assert not unknown, f"not settings ductwork reads: {sorted(unknown)}"
    assert not SECRET_SETTINGS & set(config)
    assert set(the("Secret", SECRETS)["stringData"]) >= SECRET_SETTINGS
    for name in ("DUCTWORK_SNAPSHOT_STORE", "DUCTWORK_SNAPSHOT_POLL_S", "DUCTWORK_API_KEYS_FILE"):
        assert name in config


def test_the_settings_load_as_the_read_api_loads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in environment().items():
        monkeypatch.setenv(name, value)
    serve = load(ServeSettings)
    assert serve.rate_limit_url is not None and serve.rate_limit_url.startswith("redis://")
    assert serve.trusted_proxies and serve.serve_host == "0.0.0.0"
    for group in ALL_GROUPS:
        if any(PREFIX + name.upper() in environment() for name in group.model_fields):
            load(group)


def test_the_read_api_runs_replicas_ready_on_readyz_with_no_volume_but_scratch_and_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    deployment = the("Deployment", "ductwork-api")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert deployment["spec"]["replicas"] >= 2
    assert container["command"] == ["ductwork", "serve"]
    refs = [(s.get("configMapRef") or s.get("secretRef"))["name"] for s in container["envFrom"]]
    assert refs == [SETTINGS, SECRETS]
    port = container["ports"][0]
    probe = container["readinessProbe"]["httpGet"]
    assert probe["path"] == "/readyz" and probe["port"] in (port["name"], port["containerPort"])
    assert str(port["containerPort"]) == environment()["DUCTWORK_SERVE_PORT"]
    service = the("Service", "ductwork-api")
    assert service["spec"]["ports"][0]["targetPort"] in (port["name"], port["containerPort"])
    assert service["spec"]["selector"] == pod_labels(deployment)
    # No persistent volume: scratch space and the key Secret only.
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert {kind for volume in volumes.values() for kind in volume} <= {
        "name",
        "emptyDir",
        "secret",
    }
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    for name, value in environment().items():
        monkeypatch.setenv(name, value)
    home = load(HomeSettings)
    assert "emptyDir" in volumes[mounts[str(home.home)]]
    keys_mount = mounts[str(home.keys_path.parent)]
    assert volumes[keys_mount]["secret"]["secretName"] == "ductwork-api-keys"


def pod_labels(deployment: dict[str, Any]) -> dict[str, str]:
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= labels.items()
    return selector


def helm_values() -> dict[str, Any]:
    return yaml.safe_load(HELM_VALUES.read_text())


def env_sources(section: dict[str, Any]) -> tuple[list[str], list[str]]:
    return (
        [source["name"] for source in section["envConfigMaps"]],
        [source["name"] for source in section["envSecrets"]],
    )


def test_the_dagster_chart_values_run_each_run_in_a_pod_on_postgres_with_logs_in_s3() -> None:
    values = helm_values()
    ours = ([SETTINGS], [SECRETS])
    assert env_sources(values["dagsterWebserver"]) == ours
    daemon = values["dagsterDaemon"]
    assert daemon["enabled"] is True and env_sources(daemon) == ours
    assert daemon["runMonitoring"]["enabled"] is True
    assert daemon["runMonitoring"]["freeSlotsAfterRunEndSeconds"] > 0
    assert values["concurrency"]["enabled"] is True
    assert values["concurrency"]["runs"]["maxConcurrentRuns"] == 1
    assert values["concurrency"]["pools"]["defaultLimit"] == 1
    launcher = values["runLauncher"]
    assert launcher["type"] == "K8sRunLauncher"
    k8s = launcher["config"]["k8sRunLauncher"]
    assert env_sources(k8s) == ours
    (volume,) = k8s["volumes"]
    claim = volume["persistentVolumeClaim"]["claimName"]
    the("PersistentVolumeClaim", claim)
    (mount,) = k8s["volumeMounts"]
    assert mount["name"] == volume["name"]
    assert mount["mountPath"] == environment()["DUCTWORK_HOME"]
    assert values["postgresql"]["enabled"] is False
    assert values["postgresql"]["postgresqlHost"]
    assert values["generatePostgresqlPasswordSecret"] is False
    assert "postgresqlPassword" not in values["postgresql"]  # from a Secret, never this file
    logs = values["computeLogManager"]
    assert logs["type"] == "S3ComputeLogManager"
    assert logs["config"]["s3ComputeLogManager"]["bucket"]


def test_the_chart_serves_the_same_code_location_as_the_workspace_file() -> None:
    workspace = yaml.safe_load((ROOT / "workspace.yaml").read_text())
    module = workspace["load_from"][0]["python_module"]["module_name"]
    (deployment,) = helm_values()["dagster-user-deployments"]["deployments"]
    assert deployment["dagsterApiGrpcArgs"] == ["-m", module]
    assert env_sources(deployment) == ([SETTINGS], [SECRETS])
