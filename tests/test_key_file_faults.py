"""A key file that cannot be read does not stop the read API: ``ductwork serve`` keeps the keys
it last read, logs the fault once, says so in /readyz, and takes the file again once repaired."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from ductwork.contract import paths
from ductwork.keys import KeyFile, KeyFileError
from ductwork.settings import HomeSettings
from tests.conftest import home_with_published_snapshot
from tests.helpers.cli import ductwork
from tests.helpers.serve_process import serving_process

FAULT_LINE = "the key file is not valid JSON"
TARGETS = (
    f"{paths.PRODUCTS_LIST}?count=1",  # the short path
    f"{paths.LEADS}?count=1",  # the routes
    f"{paths.DATA_WAREHOUSE_DIGITAL_ASSETS}?count=1",
)
REQUESTS_WHILE_BROKEN = 60


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_a_corrupted_key_file_keeps_the_last_good_keys_until_it_is_repaired(
    synced_home: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home_with_published_snapshot(synced_home, home)
    keys_path = HomeSettings(home=home).keys_path
    valid = KeyFile(keys_path).create("before", ["all"])
    good = keys_path.read_bytes()
    log = tmp_path / "serve.log"
    env = {**os.environ, "DUCTWORK_HOME": str(home)}
    with (
        log.open("wb") as errors,
        serving_process(home, 1, stderr=errors) as api,
        httpx.Client(base_url=api.url, timeout=30) as client,
    ):
        assert client.get(TARGETS[0], headers=bearer(valid)).status_code == 200
        keys_path.write_bytes(good[: len(good) // 2])  # cut mid-record, in place
        for n in range(REQUESTS_WHILE_BROKEN):
            answer = client.get(TARGETS[n % len(TARGETS)], headers=bearer(valid))
            assert answer.status_code == 200, answer.text[:300]
        refused = client.get(TARGETS[1], headers=bearer("dwk_never-issued"))
        assert refused.status_code == 401
        ready = client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["status"] == "ready"
        assert FAULT_LINE in ready.json()["key_file"]
        assert "keys read at" in ready.json()["key_file"]

        keys_path.write_bytes(good)  # repaired, then a key made as operators make one
        created = ductwork("keys", "create", "after", "--scope", "all", env=env, timeout=120)
        assert created.returncode == 0, created.stderr
        new_key = created.stdout.strip().splitlines()[-1]
        for key in (new_key, valid):
            assert client.get(TARGETS[1], headers=bearer(key)).status_code == 200
        assert "key_file" not in client.get("/readyz").json()
    logged = log.read_text(encoding="utf-8")
    assert logged.count(FAULT_LINE) == 1, logged[-3000:]
    assert logged.count("can be read again") == 1
    assert "Traceback" not in logged
    assert valid not in logged and new_key not in logged


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "not valid JSON"),
        (b'{"keys": {"a": 1}}', 'no "keys" list'),
        (b'{"keys": [{"name": "x", "key_hash": 5}]}', "record 1 is malformed"),
        (b"[]", 'no "keys" list'),
    ],
)
def test_keys_create_refuses_to_write_over_a_key_file_it_cannot_read(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    path = tmp_path / "api-keys.json"
    path.write_bytes(content)
    with pytest.raises(KeyFileError, match=reason):
        KeyFile(path).create("x", ["all"])
    assert path.read_bytes() == content
    assert KeyFile(path).fault is not None and reason in KeyFile(path).fault.reason
