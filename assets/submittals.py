"""The warehouse family's submittal data: one request per unit and pairing in the catalog."""

import asyncio
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource

from assets.checks import AssetRule, keys_unique_and_present
from assets.digital_assets import GROUP
from assets.ingest import (
    Fetched,
    fetch,
    fetch_and_store,
    ingest_asset,
    run_metadata,
)
from assets.resources import UpstreamResource, open_warehouse
from ductwork.contract.encoding import dumps
from ductwork.contract.paths import SUBMITTAL_DATA, UNIT_SLUGS
from ductwork.store.bookmarks import read_bookmark, write_bookmark
from ductwork.store.columns import Columns
from ductwork.store.loading import ListContent, text_or_none, timestamp_or_none
from ductwork.upstream.client import RequestStats, UpstreamClient
from ductwork.upstream.schema_drift import SUBMITTAL_RECORD, DriftTally
from warehouse_sql import read_sql

# The catalog lists (assets) whose tables the submittal requests derive from, and where the
# last complete pass over those requests is recorded.
SUBMITTAL_SOURCE_LISTS = ["pairings", *(slug.replace("-", "_") for slug in UNIT_SLUGS)]
SUBMITTALS_DERIVED = "warehouse_submittals.derived"


SUBMITTAL_SCHEMA = Columns(
    ("request_key", "string"), ("idu", "string"), ("odu", "string"),
    ("found", "bool"), ("ahri_number", "string"), ("document_url", "string"),
    ("updated_at", "timestamp"), ("source_signature", "string"), ("record", "string"),
    ("synced_at", "timestamp")
)  # fmt: skip
SUBMITTAL_BATCH = 500


class SubmittalsConfig(dg.Config):
    """Run config of the submittal sync."""

    mode: Literal["incremental", "reconcile"] = "incremental"


async def _fetch_submittals(
    client: UpstreamClient,
    requests: list[tuple[str, str | None, str | None, str]],
    drift: DriftTally,
) -> list[dict[str, Any]]:
    """Fetch one batch of submittals concurrently; a 404 becomes a row with found = false.
    Every submittal found is counted in ``drift``."""

    async def one(key: str, idu: str | None, odu: str | None, signature: str) -> dict[str, Any]:
        query = {name: value for name, value in (("idu", idu), ("odu", odu)) if value}
        answer = await client.get(
            SUBMITTAL_DATA, query, accept=frozenset({200, 404}), parse_json=True
        )
        data = answer.json().get("data") if answer.status == 200 else None
        found = isinstance(data, dict) and answer.status == 200
        if found:
            drift.count([data])
        return {
            "request_key": key,
            "idu": idu,
            "odu": odu,
            "found": found,
            "ahri_number": text_or_none(data.get("ahriNumber")) if found else None,
            "document_url": text_or_none(data.get("documentUrl")) if found else None,
            "updated_at": timestamp_or_none(data.get("updatedAt")) if found else None,
            "source_signature": signature,
            "record": dumps(data).decode() if found else None,
            "synced_at": datetime.now(UTC),
        }

    return list(await asyncio.gather(*(one(*request) for request in requests)))


def _store_submittals(con: duckdb.DuckDBPyConnection, rows: list[dict[str, Any]]) -> None:
    table = SUBMITTAL_SCHEMA.table(rows)
    con.register("incoming_rows", table)
    try:
        con.execute(read_sql("submittals_upsert"))
    finally:
        con.unregister("incoming_rows")


@ingest_asset(
    group=GROUP,
    deps=SUBMITTAL_SOURCE_LISTS,
    description=(
        "Submittal data for every Pairing (P1/P2 SRNs) and Standalone unit; incremental runs "
        "fetch only requests that are new or whose pairing or units changed."
    ),
)
def warehouse_submittals(
    config: SubmittalsConfig, upstream: UpstreamResource, warehouse: DuckDBResource
) -> dg.MaterializeResult:
    """Mirror submittal data, one request per (idu, odu).

    The requests derive from the pairings and unit lists. When none of those changed since a
    pass fetched every request it derived, and the table holds as many rows as that pass left,
    there is nothing to derive or fetch (a reconciliation fetches everything regardless).
    """
    drift = DriftTally(SUBMITTAL_RECORD)
    counted = "SELECT count(*), count(*) FILTER (found) FROM submittals"
    with open_warehouse(warehouse) as con:
        sources = _submittal_sources(con)
        last = read_bookmark(con, SUBMITTALS_DERIVED)
        total, found = con.execute(counted).fetchall()[0]
        if (
            config.mode != "reconcile"
            and last is not None
            and (last["sources"], last["rows"]) == (sources, total)
        ):
            done = _SubmittalPass(Fetched(None, RequestStats(), 0.0), last["requests"], 0, 0)
        else:
            done = _submittal_pass(config, upstream, con, drift)
            total, found = con.execute(counted).fetchall()[0]
            bookmark = {"sources": sources, "rows": total, "requests": done.derived}
            write_bookmark(con, SUBMITTALS_DERIVED, bookmark)
    return dg.MaterializeResult(
        metadata=run_metadata(
            done.fetched,
            found,
            requests_derived=done.derived,
            submittals_fetched=done.requested,
            not_found=total - found,
            rows_deleted=done.deleted,
            mode=config.mode,
            **drift.as_metadata(),
        )
    )


@dataclass(frozen=True)
class _SubmittalPass:
    """What one pass over the derived submittal requests did."""

    fetched: Fetched[None]
    derived: int  # requests the catalog implies
    requested: int  # of them, fetched (new, changed, or all in a reconciliation)
    deleted: int  # rows whose request the catalog no longer implies


def _submittal_pass(
    config: SubmittalsConfig,
    upstream: UpstreamResource,
    con: duckdb.DuckDBPyConnection,
    drift: DriftTally,
) -> _SubmittalPass:
    """Derive the requests, fetch those not stored as derived, delete those no longer implied."""
    wanted = con.execute(read_sql("submittal_requests")).fetchall()
    have = dict(con.execute("SELECT request_key, source_signature FROM submittals").fetchall())
    todo = [row for row in wanted if config.mode == "reconcile" or have.get(row[0]) != row[3]]

    async def run(client: UpstreamClient) -> None:
        await fetch_and_store(
            [todo[i : i + SUBMITTAL_BATCH] for i in range(0, len(todo), SUBMITTAL_BATCH)],
            lambda requests: _fetch_submittals(client, requests, drift),
            lambda rows: _store_submittals(con, rows),
        )

    fetched = fetch(upstream, run)
    removed = con.execute(
        "DELETE FROM submittals WHERE request_key NOT IN (SELECT unnest(?::VARCHAR[]))",
        [[row[0] for row in wanted]],
    ).fetchall()[0][0]
    return _SubmittalPass(fetched, len(wanted), len(todo), removed)


def _submittal_sources(con: duckdb.DuckDBPyConnection) -> str:
    """A digest of what the submittal requests derive from: the stored content of the lists
    they read, and the statement that derives them."""
    keys = [ListContent.bookmark_key_of(name) for name in SUBMITTAL_SOURCE_LISTS]
    found = con.execute(
        "SELECT list(stream || '=' || bookmark ORDER BY stream) FROM stream_state "
        "WHERE stream IN (SELECT unnest(?::VARCHAR[]))",
        [keys],
    ).fetchall()[0][0]
    text = "\n".join([read_sql("submittal_requests"), *(found or [])])
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


SUBMITTAL_CHECKS: list[AssetRule] = [
    keys_unique_and_present(warehouse_submittals.key, "submittals", ["request_key"]),
]
