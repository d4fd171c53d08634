"""The key file under concurrent writers, the scopes a new key must be given, and how soon a
server sees a revocation."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import stat
from pathlib import Path

import pytest

from ductwork.keys import SCOPES, KeyFile

WRITERS = 4
KEYS_EACH = 30
DEADLINE_S = 120.0


def create_and_revoke(path: str, writer: int, start: multiprocessing.synchronize.Barrier) -> None:
    """One writer process: issues its keys and revokes every other one, as fast as it can."""
    store = KeyFile(Path(path))
    start.wait(timeout=DEADLINE_S)
    for index in range(KEYS_EACH):
        store.create(f"w{writer}-k{index}", ["catalog"])
        if index % 2:
            store.revoke(f"w{writer}-k{index}")


def test_concurrent_creates_and_revokes_lose_no_key_and_undo_no_revocation(
    tmp_path: Path,
) -> None:
    path = tmp_path / "api-keys.json"
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(WRITERS)
    writers = [
        context.Process(target=create_and_revoke, args=(str(path), writer, start))
        for writer in range(WRITERS)
    ]
    for process in writers:
        process.start()
    for process in writers:
        process.join(timeout=DEADLINE_S)
        assert process.exitcode == 0
    entries = {entry.name: entry for entry in KeyFile(path).entries()}
    expected = {f"w{w}-k{i}" for w in range(WRITERS) for i in range(KEYS_EACH)}
    assert set(entries) == expected, f"lost {len(expected - set(entries))} keys"
    revoked = {name for name, entry in entries.items() if not entry.active}
    assert revoked == {f"w{w}-k{i}" for w in range(WRITERS) for i in range(1, KEYS_EACH, 2)}


def test_key_file_is_written_private_and_whole(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "api-keys.json"
    store = KeyFile(path)
    store.create("first", ["crm"])
    store.revoke("first")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["keys"][0]["revoked_at"]
    # Only the file itself and its lock beside it: no draft left behind.
    assert sorted(p.name for p in path.parent.iterdir()) == [".api-keys.json.lock", path.name]
    assert stat.S_IMODE((path.parent / ".api-keys.json.lock").stat().st_mode) == 0o600


def test_a_key_needs_at_least_one_scope_and_all_names_every_scope(tmp_path: Path) -> None:
    store = KeyFile(tmp_path / "api-keys.json")
    with pytest.raises(ValueError, match="at least one scope"):
        store.create("nothing", [])
    store.create("everything", ["all"])
    assert store.entries()[0].scopes == sorted(SCOPES)


def test_keys_create_without_a_scope_fails_in_one_line(tmp_path: Path) -> None:
    # Imported here: the writer processes above import this module, and need nothing of it.
    from tests.helpers.cli import ductwork

    env = {**os.environ, "DUCTWORK_HOME": str(tmp_path)}
    refused = ductwork("keys", "create", "analyst", env=env, timeout=120)
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "--scope" in refused.stderr, refused.stderr
    assert not (tmp_path / "api-keys.json").exists()
    made = ductwork("keys", "create", "ops-all", "--scope", "all", env=env, timeout=120)
    assert made.returncode == 0, made.stderr
    listed = ductwork("keys", "list", env=env, timeout=120)
    assert listed.stdout.split("\t")[1] == ",".join(sorted(SCOPES))


def test_a_server_bound_to_its_loop_sees_a_revocation_from_the_next_turn_on(
    tmp_path: Path,
) -> None:
    """Within one turn of the loop the look taken at its start stands (every request the turn
    answers arrived before it); the turn after sees the revocation."""
    path = tmp_path / "api-keys.json"
    writer = KeyFile(path)
    key = writer.create("short-lived", ["all"])
    server = KeyFile(path)

    async def verify_across_turns() -> tuple[bool, bool, bool]:
        server.check_per_turn(asyncio.get_running_loop())
        before = server.verify(key) is not None
        writer.revoke("short-lived")
        same_turn = server.verify(key) is not None
        await asyncio.sleep(0)
        return before, same_turn, server.verify(key) is not None

    assert asyncio.run(verify_across_turns()) == (True, True, False)


def test_an_unbound_key_file_or_another_thread_looks_on_every_verification(
    tmp_path: Path,
) -> None:
    path = tmp_path / "api-keys.json"
    writer = KeyFile(path)
    first, second = writer.create("first", ["all"]), writer.create("second", ["all"])
    server = KeyFile(path)
    assert server.verify(first) is not None
    writer.revoke("first")
    assert server.verify(first) is None

    async def from_another_thread() -> bool:
        server.check_per_turn(asyncio.get_running_loop())
        assert server.verify(second) is not None
        writer.revoke("second")
        return await asyncio.to_thread(server.verify, second) is None

    assert asyncio.run(from_another_thread())
