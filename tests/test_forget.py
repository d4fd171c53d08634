"""``ductwork forget`` erases a person, on the path users run: ``ductwork sync`` and ``ductwork
forget`` as processes on a data folder mirroring the sandbox, then the read API over it.

A lead added after a first sync, changed twice upstream (three versions), deleted upstream and
synced, then forgotten: no text of the warehouse or of the current snapshot holds its email,
phone or name (searched with DuckDB in every text column of every table), its lookup is a 404,
a feed walk from a token taken before its first version shows it once, as a delete, and the
audit log names its keyed hash, never the key. A stream without personal data is refused in
one line. A lead the upstream still serves is refused without ``--suppress``, kept out through
a full refresh with it, and back after ``--lift`` and a sync. A ``forget`` killed at any of
three points leaves the old snapshot or the erased one current, and finishes when run again.
The stream's subscribers are told, and their feed says ``delete``; the exports that still hold
the record are named.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import httpx
import pytest

from ductwork import snapshots
from ductwork.contract.encoding import quote_sku
from ductwork.contract.paths import LEADS
from ductwork.erasure.audit import AUDIT_LOG
from ductwork.erasure.forget import Request, write_pending
from ductwork.erasure.local_files import read_marker
from ductwork.erasure.warehouse import erase_rows
from ductwork.history import change_file_names
from ductwork.keys import KeyFile
from ductwork.settings import HomeSettings
from ductwork.streams.crm import LEADS as LEADS_STREAM
from ductwork.streams.internal import CONTRACTORS_PATH
from sandbox.server import SandboxHandle
from tests.conftest import UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.api import get_json
from tests.helpers.cli import ROOT, ductwork, sync_env
from tests.helpers.feed import walk_feed
from tests.helpers.sync import api_over, delete_upstream, listed_leads, mutate
from tests.helpers.text_search import text_hits
from tests.helpers.webhooks import subscriber_server

pytestmark = pytest.mark.timeout(900)

SEED = 53  # as the lead deletions' tests: a bulk import, then newer leads inside the window
LEAD_STEPS = ("--select", "crm_leads", "--select", "crm_lead_details")
EVERY_LEAD = 5000  # changes drawn: more than the tiny scale's leads, so nearly each is changed


@dataclass(frozen=True)
class Mirrored:
    """The sandbox, the data folder mirroring it, the CLI's environment and a read-API key."""

    upstream: SandboxHandle
    home: Path
    env: dict[str, str]
    key: str


def run(mirrored: Mirrored, *args: str) -> None:
    """``ductwork ARGS`` as a process; it must succeed."""
    done = ductwork(*args, env=mirrored.env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.fixture(scope="module")
def mirrored(
    object_store: ObjectStoreServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Mirrored]:
    home = tmp_path_factory.mktemp("forget")
    with object_store.sandbox(SEED, "tiny") as upstream:
        env = sync_env(home, upstream, object_store, UPSTREAM_KEY)
        key = KeyFile(HomeSettings(home=home).keys_path).create("forget", ["all"])
        mirrored = Mirrored(upstream, home, env, key)
        run(mirrored, "sync", *LEAD_STEPS)
        yield mirrored


def token_now(mirrored: Mirrored) -> str:
    """A feed token naming the data folder's current snapshot."""
    with api_over(mirrored.home, mirrored.key) as api:
        return walk_feed(api.url, mirrored.key, "leads", None, limit=10_000)[1]


def served_detail(mirrored: Mirrored, lead_id: str) -> int:
    """The status of the read API's lookup of one lead."""
    with api_over(mirrored.home, mirrored.key) as api:
        return httpx.get(
            f"{api.url}{LEADS}/{quote_sku(lead_id)}",
            headers={"Authorization": f"Bearer {mirrored.key}"},
            timeout=60,
        ).status_code


def served_ids(mirrored: Mirrored) -> set[str]:
    """The ids of the read API's whole lead list."""
    with api_over(mirrored.home, mirrored.key) as api:
        return {lead["Id"] for lead in listed_leads(api.url, mirrored.key, fields="Status")}


def current_change_file(mirrored: Mirrored) -> bytes:
    """The bytes of the leads change file of the current publish (uncompressed Arrow)."""
    folder = HomeSettings(home=mirrored.home).snapshots_dir
    current = snapshots.current(folder)
    assert current is not None
    return (folder / change_file_names.change_file_name(current.version, "leads")).read_bytes()


def rows_holding(database: Path, text: str) -> list[tuple[str, str, int]]:
    """Every (table, column, rows) of a DuckDB file whose text holds ``text``."""
    return text_hits(database, (text,))


def lead_versions(home: Path, lead_id: str) -> int:
    with duckdb.connect(str(HomeSettings(home=home).warehouse_path), read_only=True) as con:
        return con.execute("SELECT count(*) FROM lead_history WHERE id = ?", [lead_id]).fetchall()[
            0
        ][0]


def test_a_lead_changed_twice_and_deleted_upstream_is_forgotten_everywhere(
    mirrored: Mirrored,
) -> None:
    before_it = token_now(mirrored)
    added = mutate(mirrored.upstream, leads_added=5)["leads_added"]
    run(mirrored, "sync", *LEAD_STEPS)
    changed = set(added)
    for _ in range(2):
        changed &= set(mutate(mirrored.upstream, leads_changed=EVERY_LEAD)["leads_changed"])
        run(mirrored, "sync", *LEAD_STEPS)
    # Not the newest lead: the lead cursor stands there, and a later full listing ending
    # before it would be taken for a cursor moving back.
    newest = listed_leads(mirrored.upstream.url, mirrored.upstream.api_key)[-1]["Id"]
    lead_id = sorted(changed - {newest})[0]
    # Three published versions; the lead history opens one for the list item's change and
    # another for the details' in each sync.
    versions = lead_versions(mirrored.home, lead_id)
    assert versions >= 3
    detail = get_json(mirrored.upstream, f"{LEADS}/{quote_sku(lead_id)}")
    email, phone, name = detail["email"], detail["phone"], detail["name"]
    others = [
        lead for lead in listed_leads(mirrored.upstream.url, mirrored.upstream.api_key)
        if lead["Id"] != lead_id
    ]  # fmt: skip
    name_is_unique = all(lead["Name"] != name for lead in others)
    delete_upstream(mirrored.upstream, lead_id)
    run(mirrored, "sync", *LEAD_STEPS)
    warehouse = HomeSettings(home=mirrored.home).warehouse_path
    assert rows_holding(warehouse, email)  # deleted upstream, still remembered

    done = ductwork("forget", "leads", lead_id, "--reason", "GDPR Art. 17", env=mirrored.env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert lead_id not in done.stdout + done.stderr

    current = snapshots.current(HomeSettings(home=mirrored.home).snapshots_dir)
    assert current is not None
    for database in (warehouse, current.path):
        assert rows_holding(database, email) == []
        assert rows_holding(database, phone) == []
        if name_is_unique:
            assert rows_holding(database, name) == []
    # The new publish's change file (uncompressed Arrow: a byte search holds) carries the
    # delete, not the record the previous publish's file held for the key.
    snapshots_dir = HomeSettings(home=mirrored.home).snapshots_dir
    change_file = (
        snapshots_dir / change_file_names.change_file_name(current.version, "leads")
    ).read_bytes()
    assert lead_id.encode() in change_file and email.encode() not in change_file
    assert lead_versions(mirrored.home, lead_id) == 0
    assert served_detail(mirrored, lead_id) == 404
    with api_over(mirrored.home, mirrored.key) as api:
        changes, _ = walk_feed(api.url, mirrored.key, "leads", before_it, limit=10_000)
    mine = [(change["op"], change["record"]) for change in changes if change["key"] == lead_id]
    assert mine == [("delete", None)]
    audit = (mirrored.home / AUDIT_LOG).read_text(encoding="utf-8")
    assert lead_id not in audit and email not in audit
    line = json.loads(audit.splitlines()[-1])
    assert line["stream"] == "leads" and line["reason"] == "GDPR Art. 17"
    assert len(line["key_hashes"]) == 1 and line["rows_removed"]["lead_history"] == versions
    assert (mirrored.home / AUDIT_LOG).stat().st_mode & 0o077 == 0
    # The erasure ran as a Dagster run: its reason and key hash in the instance's storage
    # (SQLite: plain bytes), the key nowhere there, nor in the run's config.
    stored = b"".join(
        path.read_bytes() for path in (mirrored.home / "dagster").rglob("*") if path.is_file()
    )
    assert b"GDPR Art. 17" in stored and line["key_hashes"][0].encode() in stored
    assert lead_id.encode() not in stored and email.encode() not in stored
    assert (mirrored.home / ".erasure-secret").stat().st_mode & 0o777 == 0o600
    assert not (mirrored.home / "erasure-pending.json").exists()


def test_a_stream_without_personal_data_is_refused_in_one_line(mirrored: Mirrored) -> None:
    done = ductwork("forget", "products", "X-1", "--reason", "r", env=mirrored.env)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "not a stream with personal data" in done.stderr


def test_a_lead_still_served_is_refused_then_suppressed_through_a_full_refresh_then_lifted(
    mirrored: Mirrored,
) -> None:
    mutate(mirrored.upstream, leads_added=3)
    run(mirrored, "sync", *LEAD_STEPS)
    # A lead added since the first publish, so in its change files; not the newest, where the
    # lead cursor stands.
    lead_id = listed_leads(mirrored.upstream.url, mirrored.upstream.api_key)[-2]["Id"]
    assert lead_id in served_ids(mirrored)

    refused = ductwork("forget", "leads", lead_id, "--reason", "asked", env=mirrored.env)
    assert refused.returncode == 1
    assert "still serves" in refused.stderr and lead_id not in refused.stderr
    assert served_detail(mirrored, lead_id) == 200

    email = get_json(mirrored.upstream, f"{LEADS}/{quote_sku(lead_id)}")["email"]
    assert email.encode() in current_change_file(mirrored)
    suppress = ("forget", "leads", lead_id, "--reason", "asked", "--suppress")
    run(mirrored, *suppress)
    # The forget's publish carries the last change file on without the key's record.
    assert email.encode() not in current_change_file(mirrored)
    assert served_detail(mirrored, lead_id) == 404
    assert lead_id not in served_ids(mirrored)

    run(mirrored, "sync", "--full-refresh", "leads")
    assert served_detail(mirrored, lead_id) == 404
    assert lead_id not in served_ids(mirrored)
    assert lead_versions(mirrored.home, lead_id) == 0

    run(mirrored, "forget", "--lift", "leads", lead_id)
    run(mirrored, "sync", *LEAD_STEPS, "--reconcile")
    assert served_detail(mirrored, lead_id) == 200
    assert lead_id in served_ids(mirrored)


def served_contractor_ids(mirrored: Mirrored) -> list[str]:
    """The contractor ids in the read API's contractors answer (its ``data`` is a JSON text)."""
    with api_over(mirrored.home, mirrored.key) as api:
        answer = httpx.get(
            api.url + CONTRACTORS_PATH,
            headers={"Authorization": f"Bearer {mirrored.key}"},
            timeout=60,
        )
    assert answer.status_code == 200, answer.text
    return [item["contractorId"] for item in json.loads(answer.json()["data"])]


def test_a_contractor_still_served_is_suppressed_through_a_sync_and_back_after_lift(
    mirrored: Mirrored,
) -> None:
    run(mirrored, "sync", "--select", "internal_contractors")
    served = served_contractor_ids(mirrored)
    contractor = served[len(served) // 2]

    refused = ductwork("forget", "contractors", contractor, "--reason", "r", env=mirrored.env)
    assert refused.returncode == 1 and "still serves" in refused.stderr

    run(mirrored, "forget", "contractors", contractor, "--reason", "asked", "--suppress")
    assert contractor not in served_contractor_ids(mirrored)
    run(mirrored, "sync", "--full-refresh", "contractors")
    assert served_contractor_ids(mirrored) == [c for c in served if c != contractor]
    warehouse = HomeSettings(home=mirrored.home).warehouse_path
    with duckdb.connect(str(warehouse), read_only=True) as con:
        held = con.execute(
            "SELECT count(*) FROM contractors_raw WHERE contains(body::VARCHAR, ?)", [contractor]
        ).fetchall()[0][0]
    assert held == 0

    run(mirrored, "forget", "--lift", "contractors", contractor)
    run(mirrored, "sync", "--select", "internal_contractors")
    assert served_contractor_ids(mirrored) == served


def test_a_forget_stopped_after_its_warehouse_erasure_is_published_erased_and_finished_again(
    mirrored: Mirrored,
) -> None:
    lead_id = listed_leads(mirrored.upstream.url, mirrored.upstream.api_key)[300]["Id"]
    before_it = token_now(mirrored)
    # As a forget killed once its warehouse transaction committed: the request pending, the
    # warehouse erased, the published snapshot still the old one.
    home = HomeSettings(home=mirrored.home)
    request = Request("leads", (lead_id,), "asked", suppress=True)
    write_pending(mirrored.home, request)
    with duckdb.connect(str(home.warehouse_path)) as con:
        erase_rows(con, LEADS_STREAM, [lead_id], suppress=True)
    assert served_detail(mirrored, lead_id) == 200

    run(mirrored, "sync", *LEAD_STEPS)  # its publish erases too: never half erased
    assert served_detail(mirrored, lead_id) == 404
    assert (mirrored.home / "erasure-pending.json").exists()

    run(mirrored, "forget", "leads", lead_id, "--reason", "asked", "--suppress")
    assert not (mirrored.home / "erasure-pending.json").exists()
    assert served_detail(mirrored, lead_id) == 404
    with api_over(mirrored.home, mirrored.key) as api:
        changes, _ = walk_feed(api.url, mirrored.key, "leads", before_it, limit=10_000)
    mine = [(change["op"], change["record"]) for change in changes if change["key"] == lead_id]
    assert mine == [("delete", None)]
    lines = (mirrored.home / AUDIT_LOG).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["erasure"] for line in lines].count(request.erasure_id) == 1


def person_of_its_own(mirrored: Mirrored, index: int) -> tuple[str, str]:
    """The ``index``-th lead (by id) of the current snapshot whose email no other lead shares:
    its id and email, which then finds its copies alone."""
    current = snapshots.current(HomeSettings(home=mirrored.home).snapshots_dir)
    assert current is not None
    with duckdb.connect(str(current.path), read_only=True) as con:
        rows = con.execute(
            "SELECT id, email FROM lead_details WHERE email IS NOT NULL "
            "QUALIFY count(*) OVER (PARTITION BY email) = 1 ORDER BY id"
        ).fetchall()
    return str(rows[index][0]), str(rows[index][1])


def killed_at(mirrored: Mirrored, point: Callable[[], bool], *args: str) -> bool:
    """``ductwork ARGS`` as a process, killed whole (SIGKILL to its session) as soon as
    ``point`` holds; whether it was killed (False: it finished first)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli", *args],
        cwd=ROOT, env=mirrored.env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + KILL_WITHIN_S
    try:
        while process.poll() is None:
            if point():
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                return True
            assert time.monotonic() < deadline, "the kill point never came"
            time.sleep(0.002)  # a poll interval: what is asserted holds whenever the kill lands
        return False
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def published_whole(mirrored: Mirrored, lead_id: str, email: str) -> bool:
    """Whether the current snapshot is the one before the erasure (True: it holds the lead)
    or the erased one (False: no text of it holds the email); never anything between."""
    current = snapshots.current(HomeSettings(home=mirrored.home).snapshots_dir)
    assert current is not None
    with duckdb.connect(str(current.path), read_only=True) as con:
        listed = con.execute("SELECT count(*) FROM lead_details WHERE id = ?", [lead_id])
        held = listed.fetchall()[0][0] == 1
    assert held or rows_holding(current.path, email) == [], "a snapshot half erased"
    return held


KILL_WITHIN_S = 300.0
KILL_POINTS = ("request written", "snapshot published", "copies removed")


@pytest.mark.parametrize("point", KILL_POINTS)
def test_a_forget_killed_at_any_point_leaves_the_old_state_or_the_erased_one_and_finishes_again(
    mirrored: Mirrored, point: str
) -> None:
    """``ductwork forget`` killed (SIGKILL to its whole session, as the crash tests kill a
    sync) once its request is written, once its snapshot is current, once the older copies
    went: the published snapshot is then the old one or the erased one, and the same command
    run again finishes the erasure, logged once."""
    lead_id, email = person_of_its_own(mirrored, 100 + 10 * KILL_POINTS.index(point))
    folder = HomeSettings(home=mirrored.home).snapshots_dir
    before = snapshots.current(folder)
    marker = read_marker(folder)
    assert before is not None
    points: dict[str, Callable[[], bool]] = {
        "request written": lambda: (mirrored.home / "erasure-pending.json").exists(),
        "snapshot published": lambda: (
            getattr(snapshots.current(folder), "version", None) != before.version
        ),
        "copies removed": lambda: read_marker(folder) != marker,
    }
    audit = mirrored.home / AUDIT_LOG
    logged = len(audit.read_text(encoding="utf-8").splitlines()) if audit.exists() else 0
    command = ("forget", "leads", lead_id, "--reason", "asked", "--suppress")

    assert killed_at(mirrored, points[point], *command), "it ended before the kill point"

    still_held = published_whole(mirrored, lead_id, email)
    if point != "request written":
        assert not still_held  # killed after its publish: the erased snapshot is current
    left = (mirrored.home / "erasure-pending.json").exists()  # the work left to finish
    if point != "copies removed":  # (after it, only the audit line and the pending file's end)
        assert left
    run(mirrored, *command)
    assert not (mirrored.home / "erasure-pending.json").exists()
    assert not published_whole(mirrored, lead_id, email)
    assert served_detail(mirrored, lead_id) == 404
    lines = audit.read_text(encoding="utf-8").splitlines()
    erasures = [json.loads(line)["erasure"] for line in lines[logged:]]
    # Each erasure logged once, killed or not: an unfinished one by the run that finishes it. A
    # kill that lands only once the erasure had logged and cleared its request (the polling can
    # see the copies go that late) leaves nothing to finish, and the run again is an erasure of
    # its own.
    assert len(erasures) == len(set(erasures)) == (1 if left else 2)
    for path in folder.glob(f"{snapshots.PREFIX}*{snapshots.SUFFIX}"):
        assert rows_holding(path, email) == [], path.name


def test_the_streams_subscribers_are_told_of_a_forget_and_their_feed_says_delete(
    mirrored: Mirrored,
) -> None:
    """A subscriber of the leads is notified of the erasure's publish as of any other, signed,
    and the feed from the notification's ``since`` names the lead once, as a ``delete``."""
    lead_id, _ = person_of_its_own(mirrored, 200)
    with subscriber_server() as subscriber:
        done = ductwork("subscriptions", "add", "erasures", "--url", subscriber.url,
                        "--stream", "leads", env=mirrored.env)  # fmt: skip
        assert done.returncode == 0, done.stderr
        subscriber.secret = done.stdout.strip().splitlines()[-1]
        try:
            run(mirrored, "forget", "leads", lead_id, "--reason", "asked", "--suppress")
            [told] = subscriber.wait_for(1, 60)
        finally:
            run(mirrored, "subscriptions", "remove", "erasures")
    assert told.verified and told.body["stream"] == "leads"
    assert told.body["counts"]["delete"] == 1
    with api_over(mirrored.home, mirrored.key) as api:
        changes, _ = walk_feed(api.url, mirrored.key, "leads", told.body["since"], limit=10_000)
    assert [(c["key"], c["op"], c["record"]) for c in changes] == [(lead_id, "delete", None)]


def test_a_forget_names_the_exports_that_still_hold_the_record(
    mirrored: Mirrored, tmp_path: Path
) -> None:
    """Exports are outside the mirror's reach: ``ductwork forget`` lists those it knows of
    (``ductwork export`` notes each) that still hold the record, and leaves them be."""
    lead_id, _ = person_of_its_own(mirrored, 300)
    holding, gone = tmp_path / "holding", tmp_path / "gone"
    run(mirrored, "export", "--to", str(holding))
    run(mirrored, "export", "--to", str(gone))
    shutil.rmtree(gone)  # removed by hand: nothing to name
    done = ductwork("forget", "leads", lead_id, "--reason", "asked", "--suppress",
                    env=mirrored.env)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 export(s) written by `ductwork export` still hold" in done.stdout
    assert str(holding) in done.stdout and str(gone) not in done.stdout
    assert lead_id not in done.stdout + done.stderr  # the key is never printed
    assert list(holding.glob("*.parquet")) or list(holding.rglob("*.parquet"))  # left as it was
