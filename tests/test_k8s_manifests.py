"""The Kubernetes files under deploy/k8s hold what "Running on Kubernetes"
(``docs/kubernetes.md``) says.

Every manifest is checked against the Kubernetes schemas (kubernetes-validate's bundled ones,
offline, rejecting unknown fields); the Helm values file is no manifest and is checked against
the chart keys it uses. The settings they carry must load as ductwork loads them. Each workload
gets only its own secrets (the read API no upstream key, no webhook URL and no object-store
keys that write), NetworkPolicies keep the Dagster webserver, its code location and Redis to
the pods that need them, and the webserver is not exposed.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import redis
import yaml

from ductwork.settings import (
    ALL_GROUPS,
    PREFIX,
    FileSettings,
    HomeSettings,
    S3Settings,
    ServeSettings,
    SnapshotStoreSettings,
    load,
)
from ductwork.snapshots.store import StoreLocation
from sandbox.local_server import free_socket
from tests.helpers.deployment import (
    ROOT,
    SETTINGS,
    config,
    every,
    helm_values,
    manifests,
    policy_of,
    secret_values,
    the,
)

KUBERNETES_VERSION = "1.30.0"
API_SECRETS, API_KEYS = "ductwork-api-secrets", "ductwork-api-keys"
SYNC_SECRETS, ALERT_SECRETS = "ductwork-sync-secrets", "ductwork-alert-secrets"
LOG_READER, REDIS_CONFIG = "dagster-compute-log-reader", "ductwork-redis"
UPSTREAM_KEY, WEBHOOK_URL = "DUCTWORK_UPSTREAM_API_KEY", "DUCTWORK_ALERT_WEBHOOK_URL"
# Settings that carry credentials, so they belong in a Secret only.
SECRET_SETTINGS = {UPSTREAM_KEY, "DUCTWORK_RATE_LIMIT_URL", WEBHOOK_URL}
OBJECT_STORE_KEYS = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
WORKLOAD = "ductwork/workload"  # the pod label the NetworkPolicies select on
READ_ACTIONS = {"s3:GetObject", "s3:ListBucket"}
# What ``ductwork serve`` loads: a replica needs no other setting.
READ_API_GROUPS = (HomeSettings, ServeSettings, SnapshotStoreSettings, S3Settings, FileSettings)


def test_every_manifest_passes_the_kubernetes_schema_with_no_unknown_field() -> None:
    found = manifests()
    kinds = {doc["kind"] for _, doc in found}
    assert {
        "Deployment", "Service", "ConfigMap", "Secret", "PersistentVolumeClaim", "NetworkPolicy"
    } <= kinds  # fmt: skip
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


def environment(*secrets: str) -> dict[str, str]:
    """The variables a pod gets from the ConfigMap and ``secrets``."""
    found = dict(config())
    for name in secrets:
        values = secret_values(name)
        assert not set(found) & set(values), name
        found.update(values)
    return found


def test_the_settings_are_ductworks_own_and_secrets_stay_in_secrets() -> None:
    known = {PREFIX + name.upper() for group in ALL_GROUPS for name in group.model_fields}
    named = set(config())
    for secret in every("Secret"):
        named |= set(secret_values(secret["metadata"]["name"]))
    unknown = {name for name in named if name.startswith(PREFIX)} - known
    assert not unknown, f"not settings ductwork reads: {sorted(unknown)}"
    assert not SECRET_SETTINGS & set(config())
    names = [secret["metadata"]["name"] for secret in every("Secret")]
    for setting in SECRET_SETTINGS:  # each in exactly one Secret: the one of its workload
        holders = [name for name in names if setting in secret_values(name)]
        assert len(holders) == 1, (setting, holders)
    for name in ("DUCTWORK_SNAPSHOT_STORE", "DUCTWORK_SNAPSHOT_POLL_S", "DUCTWORK_API_KEYS_FILE"):
        assert name in config()


def test_the_settings_load_as_the_read_api_and_the_run_pods_load_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with monkeypatch.context() as api:
        for name, value in environment(API_SECRETS).items():
            api.setenv(name, value)
        serve = load(ServeSettings)
        assert serve.rate_limit_url is not None and serve.rate_limit_url.startswith("redis://")
        assert serve.trusted_proxies and serve.serve_host == "0.0.0.0"
        for group in READ_API_GROUPS:
            load(group)
    run = environment(SYNC_SECRETS)
    for name, value in run.items():
        monkeypatch.setenv(name, value)
    for group in ALL_GROUPS:
        if any(PREFIX + name.upper() in run for name in group.model_fields):
            load(group)


def api_pod() -> dict[str, Any]:
    return the("Deployment", "ductwork-api")["spec"]["template"]


def test_the_read_api_runs_replicas_ready_on_readyz_with_no_volume_but_scratch_and_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    deployment = the("Deployment", "ductwork-api")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert deployment["spec"]["replicas"] >= 2
    assert container["command"] == ["ductwork", "serve"]
    refs = [(s.get("configMapRef") or s.get("secretRef"))["name"] for s in container["envFrom"]]
    assert refs == [SETTINGS, API_SECRETS]
    port = container["ports"][0]
    probe = container["readinessProbe"]["httpGet"]
    assert probe["path"] == "/readyz" and probe["port"] in (port["name"], port["containerPort"])
    assert str(port["containerPort"]) == config()["DUCTWORK_SERVE_PORT"]
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
    for name, value in environment(API_SECRETS).items():
        monkeypatch.setenv(name, value)
    home = load(HomeSettings)
    assert "emptyDir" in volumes[mounts[str(home.home)]]
    keys_mount = mounts[str(home.keys_path.parent)]
    assert volumes[keys_mount]["secret"]["secretName"] == API_KEYS


def pod_labels(deployment: dict[str, Any]) -> dict[str, str]:
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= labels.items()
    return selector


def secrets_of_pod(pod: dict[str, Any]) -> set[str]:
    """Every Secret a pod template can read: through envFrom, env and volumes."""
    spec = pod["spec"]
    names = set()
    for container in [*spec["containers"], *spec.get("initContainers", [])]:
        names |= {s["secretRef"]["name"] for s in container.get("envFrom", []) if "secretRef" in s}
        for variable in container.get("env", []):
            reference = variable.get("valueFrom", {}).get("secretKeyRef")
            if reference:
                names.add(reference["name"])
    for volume in spec.get("volumes", []):
        if "secret" in volume:
            names.add(volume["secret"]["secretName"])
        for source in volume.get("projected", {}).get("sources", []):
            if "secret" in source:
                names.add(source["secret"]["name"])
    return names


def allowed(policy: dict[str, Any]) -> list[tuple[str, str]]:
    """(action, resource) pairs a policy allows; it must deny nothing and use no wildcard
    action, so these are all it grants."""
    pairs = []
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow" and "NotAction" not in statement
        assert "NotResource" not in statement
        for action in statement["Action"]:
            assert "*" not in action, action
            pairs += [(action, resource) for resource in statement["Resource"]]
    return pairs


def bucket_and_keys(resource: str) -> tuple[str, str | None]:
    """``arn:aws:s3:::BUCKET`` or ``arn:aws:s3:::BUCKET/KEYS``."""
    assert resource.startswith("arn:aws:s3:::"), resource
    bucket, _, keys = resource.removeprefix("arn:aws:s3:::").partition("/")
    return bucket, keys or None


def object_store_keys_of(secret: str) -> dict[str, Any] | None:
    """The policy of a Secret's object-store keys; None when it holds none."""
    values = secret_values(secret)
    if not OBJECT_STORE_KEYS & set(values):
        return None
    assert set(values) >= OBJECT_STORE_KEYS, secret
    policy = policy_of(secret)
    assert policy is not None, f"{secret} holds object-store keys but names no policy"
    return policy


def writes(policy: dict[str, Any] | None) -> bool:
    return policy is not None and any(a not in READ_ACTIONS for a, _ in allowed(policy))


def snapshot_store() -> StoreLocation:
    return StoreLocation.parse(config()["DUCTWORK_SNAPSHOT_STORE"])


def test_the_read_api_holds_no_upstream_key_webhook_or_object_store_keys_that_write() -> None:
    secrets = secrets_of_pod(api_pod())
    assert secrets == {API_SECRETS, API_KEYS}
    for secret in secrets:
        assert not {UPSTREAM_KEY, WEBHOOK_URL} & set(secret_values(secret)), secret
    policy = object_store_keys_of(API_SECRETS)
    assert policy is not None and not writes(policy)
    # It may read the snapshots' prefix and list their bucket, and nothing else.
    store = snapshot_store()
    for action, resource in allowed(policy):
        bucket, keys = bucket_and_keys(resource)
        assert bucket == store.bucket, resource
        if action == "s3:GetObject":
            assert keys == f"{store.prefix}*", resource
        else:
            assert keys is None, resource
    assert {action for action, _ in allowed(policy)} == READ_ACTIONS
    assert object_store_keys_of(API_KEYS) is None


def code_location() -> dict[str, Any]:
    (deployment,) = helm_values()["dagster-user-deployments"]["deployments"]
    return deployment


def env_sources(section: dict[str, Any]) -> tuple[list[str], list[str]]:
    return (
        [source["name"] for source in section["envConfigMaps"]],
        [source["name"] for source in section["envSecrets"]],
    )


def secrets_by_workload() -> dict[str, set[str]]:
    """The Secrets each workload's pods read: the read API's manifest and Dagster's values."""
    values = helm_values()
    return {
        "api": secrets_of_pod(api_pod()),
        "webserver": set(env_sources(values["dagsterWebserver"])[1]),
        "daemon": set(env_sources(values["dagsterDaemon"])[1]),
        "code location": set(env_sources(code_location())[1]),
        "run": set(env_sources(values["runLauncher"]["config"]["k8sRunLauncher"])[1]),
    }


def test_each_secret_reaches_only_the_workload_that_uses_it() -> None:
    workloads = secrets_by_workload()
    known = {secret["metadata"]["name"] for secret in every("Secret")}
    for workload, secrets in workloads.items():
        assert secrets <= known, (workload, secrets - known)

    def holders(test: Any) -> set[str]:
        return {w for w, secrets in workloads.items() if any(test(s) for s in secrets)}

    assert holders(lambda s: UPSTREAM_KEY in secret_values(s)) == {"run"}
    assert holders(lambda s: WEBHOOK_URL in secret_values(s)) == {"code location"}
    assert holders(lambda s: writes(object_store_keys_of(s))) == {"run"}
    assert holders(lambda s: object_store_keys_of(s) is not None) == {"run", "api", "webserver"}
    assert workloads["daemon"] == set()
    # Runs take the run launcher's Secret only, not the code location's as well.
    assert code_location()["includeConfigInLaunchedRuns"] == {"enabled": False}
    # The webserver may read the steps' logs, where the run pods write them, and nothing else.
    (reader,) = workloads["webserver"]
    logs = helm_values()["computeLogManager"]["config"]["s3ComputeLogManager"]
    policy = object_store_keys_of(reader)
    assert policy is not None
    for action, resource in allowed(policy):
        assert action in READ_ACTIONS
        bucket, keys = bucket_and_keys(resource)
        assert bucket == logs["bucket"] and keys in (None, f"{logs['prefix']}/*"), resource


def test_snapshots_images_and_step_logs_live_in_buckets_of_their_own() -> None:
    store = snapshot_store()
    media = config()["DUCTWORK_S3_BUCKET"]
    logs = helm_values()["computeLogManager"]["config"]["s3ComputeLogManager"]
    assert len({store.bucket, media, logs["bucket"]}) == 3
    # The run pods' keys may write each where the sync writes it: no more, no less.
    policy = object_store_keys_of(SYNC_SECRETS)
    assert policy is not None
    granted = allowed(policy)
    written = {(bucket_and_keys(r), a) for a, r in granted if a not in READ_ACTIONS}
    assert {place for place, _ in written} == {
        (store.bucket, f"{store.prefix}*"),
        (media, "images/*"),
        (logs["bucket"], f"{logs['prefix']}/*"),
    }
    assert ((store.bucket, f"{store.prefix}*"), "s3:DeleteObject") in written  # pruning
    assert {bucket for (bucket, _), a in written if a == "s3:DeleteObject"} == {store.bucket}


def pods_labelled() -> dict[str, dict[str, str]]:
    """The labels of each workload's pods (the chart's own labels aside)."""
    values = helm_values()
    return {
        "api": api_pod()["metadata"]["labels"],
        "redis": the("Deployment", "redis")["spec"]["template"]["metadata"]["labels"],
        "webserver": values["dagsterWebserver"]["labels"],
        "daemon": values["dagsterDaemon"]["labels"],
        "code location": code_location()["labels"],
        "run": values["runLauncher"]["config"]["k8sRunLauncher"]["labels"],
    }


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a label selector (matchLabels only, never empty) selects pods with ``labels``."""
    assert set(selector) == {"matchLabels"} and selector["matchLabels"], selector
    return selector["matchLabels"].items() <= labels.items()


def admitted(workload: str) -> tuple[set[str], set[int]]:
    """The workloads the NetworkPolicies let reach ``workload``'s pods, and on which ports.
    Fails on any rule that would admit more than named pods of this namespace."""
    pods = pods_labelled()
    policies = [
        p for p in every("NetworkPolicy") if selects(p["spec"]["podSelector"], pods[workload])
    ]
    assert policies, f"no NetworkPolicy selects the {workload} pods"
    sources: set[str] = set()
    ports: set[int] = set()
    for policy in policies:
        assert "Ingress" in policy["spec"]["policyTypes"]
        for rule in policy["spec"].get("ingress", []):
            assert rule.get("from") and rule.get("ports"), policy["metadata"]["name"]
            for peer in rule["from"]:
                assert set(peer) == {"podSelector"}, peer  # no other namespace, no address range
                chosen = {w for w, labels in pods.items() if selects(peer["podSelector"], labels)}
                assert chosen, peer
                sources |= chosen
            ports |= {port["port"] for port in rule["ports"]}
    return sources, ports


def test_network_policies_let_only_the_read_api_reach_the_webserver_and_redis() -> None:
    webserver = helm_values()["dagsterWebserver"]["service"]["port"]
    assert admitted("webserver") == ({"api"}, {webserver})
    redis_port = the("Deployment", "redis")["spec"]["template"]["spec"]["containers"][0]
    assert admitted("redis") == ({"api"}, {redis_port["ports"][0]["containerPort"]})
    assert admitted("code location") == ({"webserver", "daemon"}, {code_location()["port"]})
    # Each label names one workload, so no policy selects pods it was not written for.
    labels = [pods[WORKLOAD] for pods in pods_labelled().values()]
    assert len(labels) == len(set(labels))


def test_the_dagster_webserver_is_not_exposed_and_the_read_api_finds_it() -> None:
    values = helm_values()
    assert values["ingress"]["enabled"] is False
    service = values["dagsterWebserver"]["service"]
    assert service["type"] == "ClusterIP"
    assert not every("Ingress")
    exposed = [s for s in every("Service") if s["spec"].get("type", "ClusterIP") != "ClusterIP"]
    assert not exposed
    # The chart names the Service <release>-dagster-webserver; the release is "dagster".
    url = urlsplit(config()["DUCTWORK_DAGSTER_URL"])
    assert url.hostname == "dagster-dagster-webserver" and (url.port or 80) == service["port"]


def test_the_read_api_reaches_redis_by_its_service_with_its_password() -> None:
    url = urlsplit(secret_values(API_SECRETS)["DUCTWORK_RATE_LIMIT_URL"])
    service = the("Service", "redis")
    assert url.hostname == service["metadata"]["name"]
    assert url.port == service["spec"]["ports"][0]["port"]
    assert service["spec"]["selector"] == pod_labels(the("Deployment", "redis"))
    conf = secret_values(REDIS_CONFIG)["redis.conf"]
    assert f"requirepass {url.password}\n" in conf


@contextmanager
def running_redis_with(conf: str) -> Iterator[int]:
    """Debian's redis-server with ``conf`` (as the Secret gives it), on a free loopback port."""
    with free_socket() as sock:
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="redis-") as folder:
        path = Path(folder) / "redis.conf"
        path.write_text(conf, encoding="utf-8")
        command = ["redis-server", str(path), "--bind", "127.0.0.1", "--port", str(port)]
        process = subprocess.Popen(
            [*command, "--dir", folder], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            yield port
        finally:
            process.terminate()
            process.wait(timeout=10)


def test_redis_takes_its_configuration_and_admits_only_the_read_apis_url() -> None:
    url = urlsplit(secret_values(API_SECRETS)["DUCTWORK_RATE_LIMIT_URL"])
    with running_redis_with(secret_values(REDIS_CONFIG)["redis.conf"]) as port:
        local = f"redis://:{url.password}@127.0.0.1:{port}{url.path}"
        client = redis.Redis.from_url(local, socket_timeout=1.0, socket_connect_timeout=1.0)
        deadline = time.monotonic() + 15
        while True:  # until it listens (a fresh redis-server takes a few milliseconds)
            try:
                assert client.ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        assert client.config_get("maxmemory") == {"maxmemory": str(64 << 20)}
        assert client.config_get("save") == {"save": ""}
        anonymous = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1.0)
        with pytest.raises(redis.AuthenticationError):
            anonymous.ping()
        client.close()
        anonymous.close()


def test_the_dagster_chart_values_run_each_run_in_a_pod_on_postgres_with_logs_in_s3() -> None:
    values = helm_values()
    assert env_sources(values["dagsterWebserver"]) == ([SETTINGS], [LOG_READER])
    daemon = values["dagsterDaemon"]
    assert daemon["enabled"] is True and env_sources(daemon) == ([SETTINGS], [])
    assert daemon["runMonitoring"]["enabled"] is True
    assert daemon["runMonitoring"]["freeSlotsAfterRunEndSeconds"] > 0
    assert values["concurrency"]["enabled"] is True
    assert values["concurrency"]["runs"]["maxConcurrentRuns"] == 1
    assert values["concurrency"]["pools"]["defaultLimit"] == 1
    launcher = values["runLauncher"]
    assert launcher["type"] == "K8sRunLauncher"
    k8s = launcher["config"]["k8sRunLauncher"]
    assert env_sources(k8s) == ([SETTINGS], [SYNC_SECRETS])
    (volume,) = k8s["volumes"]
    claim = volume["persistentVolumeClaim"]["claimName"]
    the("PersistentVolumeClaim", claim)
    (mount,) = k8s["volumeMounts"]
    assert mount["name"] == volume["name"]
    assert mount["mountPath"] == config()["DUCTWORK_HOME"]
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
    deployment = code_location()
    assert deployment["dagsterApiGrpcArgs"] == ["-m", module]
    assert env_sources(deployment) == ([SETTINGS], [ALERT_SECRETS])
