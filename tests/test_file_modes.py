"""The data folder after real commands (``sync``, ``keys create``, ``subscriptions add`` and
``serve`` answering requests): nothing in it readable by other local users, or by one named group
only; a folder left readable is tightened."""

from __future__ import annotations

import os
import sqlite3
import stat
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from ductwork.file_modes import FileModes, tighten_home
from ductwork.notifications.delivery import delivering
from ductwork.notifications.subscriptions import SubscriptionStore
from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer, home_with_published_snapshot
from tests.helpers.cli import ductwork, free_ports, sync_env
from tests.helpers.groups import a_group_to_share_with
from tests.helpers.serve_process import serving_process
from tests.helpers.webhooks import subscriber_server


def modes_under(home: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``home`` (itself included): its permission bits and gid."""
    found = {".": (stat.S_IMODE(home.stat().st_mode), home.stat().st_gid)}
    for path in home.rglob("*"):
        info = path.lstat()
        if not stat.S_ISLNK(info.st_mode):
            found[str(path.relative_to(home))] = (stat.S_IMODE(info.st_mode), info.st_gid)
    return found


def wrong_modes(home: Path, file_mode: int, dir_mode: int, gid: int | None) -> dict[str, str]:
    """The entries whose mode (or group, when one is asked for) breaks the rule."""
    wrong = {}
    for name, (mode, owner_group) in modes_under(home).items():
        expected = dir_mode if (home / name).is_dir() else file_mode
        if mode != expected or (gid is not None and owner_group != gid):
            wrong[name] = f"{mode:o} gid {owner_group}, expected {expected:o}"
    return wrong


def create_key(env: dict[str, str]) -> str:
    """``ductwork keys create`` of a key for every data family; the key."""
    made = ductwork("keys", "create", "analyst", "--scope", "all", env=env, timeout=120)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip().splitlines()[-1]


def subscribe(env: dict[str, str], url: str) -> None:
    """``ductwork subscriptions add`` of a subscriber to the products (the signing secrets'
    file)."""
    added = ductwork("subscriptions", "add", "hook", "--url", url, "--stream", "products", env=env)
    assert added.returncode == 0, added.stderr


def serve_and_ask(home: Path, key: str, settings: dict[str, str]) -> set[str]:
    """Run ``ductwork serve`` (two workers) over ``home`` until it has answered a page of
    digital assets, read from the record file it writes beside the snapshot, and a
    pim-image-sync trigger, which takes its lock in the data folder before it finds no
    webserver; returns the entries it added to the folder."""
    before = set(modes_under(home))
    (closed,) = free_ports(1)  # no Dagster webserver there: the trigger answers 503
    settings = {**settings, "DUCTWORK_DAGSTER_URL": f"http://127.0.0.1:{closed}"}
    with serving_process(home, workers=2, settings=settings) as api:
        headers = {"Authorization": f"Bearer {key}"}
        page = httpx.get(f"{api.url}/warehouse/v1.0/digital-assets", headers=headers, timeout=30)
        assert page.status_code == 200, page.text
        trigger = httpx.get(
            f"{api.url}/internal/v1.0/jobs/pim-image-sync", headers=headers, timeout=30
        )
        assert trigger.status_code == 503, trigger.text
    added = set(modes_under(home)) - before
    assert any(name.startswith("snapshots/.records-") for name in added), sorted(added)
    return added


def test_a_synced_and_published_data_folder_is_private_to_its_owner(
    upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    env = sync_env(home, upstream, object_store, UPSTREAM_KEY)
    with subscriber_server() as subscriber:
        subscribe(env, subscriber.url)
        done = ductwork("sync", "--select", "group:catalog", env=env)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    key = create_key(env)
    served = serve_and_ask(home, key, {})
    found = modes_under(home)
    # The rule covers every kind of file the folder holds.
    for name in [
        "warehouse.duckdb", "warehouse.lease", "api-keys.json", "snapshots/CURRENT",
        "snapshots/WAREHOUSE-STAMP", "dagster/dagster.yaml", "dagster/storage",
        "notifications", "notifications/subscriptions.sqlite",
    ]:  # fmt: skip
        assert name in found, sorted(found)
    assert any(name.startswith("snapshots/snapshot-") for name in found)
    assert any(name.endswith(".db") for name in found), "the instance's SQLite storage"
    assert served <= set(found)
    assert wrong_modes(home, 0o600, 0o700, None) == {}


def test_a_folder_an_earlier_release_left_readable_is_tightened_to_the_file_group(
    synced_home: Path, upstream: SandboxHandle, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home_with_published_snapshot(synced_home, home)
    (home / "api-keys.json").write_text('{"keys": []}', encoding="utf-8")
    for path in [home, *home.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # as releases before the rule made them
    group = a_group_to_share_with()
    env = {
        **sync_env(home, upstream, object_store, UPSTREAM_KEY),
        "DUCTWORK_FILE_GROUP": group.gr_name,
    }
    subscribe(env, "http://127.0.0.1:9/hooks")
    done = ductwork("sync", "--select", "group:catalog", env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "notifications/subscriptions.sqlite" in modes_under(home)
    assert "dagster/dagster.yaml" in modes_under(home)
    key = create_key(env)
    serve_and_ask(home, key, {"DUCTWORK_FILE_GROUP": group.gr_name})
    # Files 0640, folders 2750 (new files inherit the folder's group), all of that group.
    assert wrong_modes(home, 0o640, 0o2750, group.gr_gid) == {}


def test_an_unknown_file_group_is_a_one_line_error(tmp_path: Path) -> None:
    env = {**os.environ, "DUCTWORK_HOME": str(tmp_path), "DUCTWORK_FILE_GROUP": "no-such-group-x"}
    done = ductwork("keys", "list", env=env, timeout=120)
    assert done.returncode == 2
    assert (
        done.stderr
        == "ductwork: DUCTWORK_FILE_GROUP names no group on this host: no-such-group-x\n"
    )


def test_the_whole_folder_is_walked_once_per_rule_then_only_its_top(tmp_path: Path) -> None:
    deep = tmp_path / "dagster" / "storage" / "run" / "compute.log"
    deep.parent.mkdir(parents=True)
    deep.write_text("x", encoding="utf-8")
    pointer = tmp_path / "snapshots" / "CURRENT"
    pointer.parent.mkdir()
    pointer.write_text("x", encoding="utf-8")
    # As a copy or a hand-made folder leaves them, whatever this process's own mask is.
    for made in (deep, pointer):
        made.chmod(0o644)
    for folder in (*deep.parents[:3], pointer.parent):
        folder.chmod(0o755)
    private = FileModes()
    assert tighten_home(tmp_path, private) > 0
    assert wrong_modes(tmp_path, 0o600, 0o700, None) == {}
    deep.chmod(0o644)
    pointer.chmod(0o644)
    assert tighten_home(tmp_path, private) == 1  # the pointer; the deep file waits
    assert stat.S_IMODE(deep.stat().st_mode) == 0o644
    shared = FileModes(a_group_to_share_with().gr_gid)
    tighten_home(tmp_path, shared)  # another rule: the whole folder again
    assert wrong_modes(tmp_path, 0o640, 0o2750, shared.gid) == {}


def test_the_subscriptions_file_its_journal_its_locks_and_folder_follow_the_rule_under_any_mask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In this process, as the daemon's sensor runs the same code: a mask that would leave new
    # files readable by everyone, so only the modes ductwork sets itself can make them private.
    group = a_group_to_share_with()
    rules = [(None, FileModes()), (group.gr_name, FileModes(group.gr_gid))]
    loose = os.umask(0o022)
    try:
        for setting, modes in rules:
            if setting is None:
                monkeypatch.delenv("DUCTWORK_FILE_GROUP", raising=False)
            else:
                monkeypatch.setenv("DUCTWORK_FILE_GROUP", setting)
            home = modes.make_private_dir(tmp_path / f"home-{setting}")
            store = SubscriptionStore(home / "notifications")
            subscription = store.add("hook", "http://127.0.0.1:9/", ["leads"], 0)
            with delivering(store, subscription) as taken:
                assert taken
            # A write under way: SQLite's rollback journal exists beside the file.
            with closing(sqlite3.connect(store.path)) as con:
                con.execute("BEGIN IMMEDIATE")
                con.execute("UPDATE subscriptions SET attempts = 1")
                found = set(modes_under(home))
                wrong = wrong_modes(home, modes.file_mode, modes.dir_mode, modes.gid)
                con.rollback()
            assert {
                "notifications", "notifications/subscriptions.sqlite",
                "notifications/subscriptions.sqlite-journal",
                f"notifications/{subscription.id}.lock",
            } <= found, sorted(found)  # fmt: skip
            assert wrong == {}
    finally:
        os.umask(loose)
