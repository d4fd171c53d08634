"""What a stream is, as data: the registry's entries, from which everything else derives.

A **stream** is one kind of upstream record the mirror keeps, named as the changes feed
names it. It is read in one or more **steps**, each one Dagster asset
writing one table (or a slice of one); its **cadence** says when it is synced and how fresh it
must be; its **serving** says how the read API answers it. Nothing here imports Dagster: the
assets, jobs, schedules, checks, CLI options and routes are built from these entries by the
layers above.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from ductwork.contract.paths import Family
from ductwork.upstream.schema_drift import RecordShape

if TYPE_CHECKING:
    from ductwork.sync.context import StepResult, SyncContext


@dataclass(frozen=True)
class Cadence:
    """When a stream is synced, and how stale it may get before Dagster flags it.

    ``job`` and ``schedule`` name the job that syncs every stream of this cadence and the
    schedule that starts it (None: no job of its own; the nightly reconciliation covers it).
    """

    name: str
    warn_after: timedelta
    fail_after: timedelta
    job: str | None = None
    schedule: str | None = None
    cron: str | None = None


HOURLY = Cadence(
    "hourly", timedelta(hours=1, minutes=30), timedelta(hours=3),
    job="catalog_sync", schedule="catalog_hourly", cron="7 * * * *",
)  # fmt: skip
EVERY_15_MINUTES = Cadence(
    "every 15 minutes", timedelta(minutes=35), timedelta(hours=1),
    job="assets_and_leads_sync", schedule="assets_and_leads_every_15_minutes",
    cron="*/15 * * * *",
)  # fmt: skip
NIGHTLY = Cadence("nightly", timedelta(hours=25), timedelta(hours=49))
CADENCES: tuple[Cadence, ...] = (HOURLY, EVERY_15_MINUTES, NIGHTLY)


@dataclass(frozen=True)
class Table:
    """Where a step's rows are: a warehouse table, or the slice of it whose ``slice_column``
    holds ``slice_value``, and the columns that key its rows."""

    name: str
    key: tuple[str, ...]
    slice_column: str | None = None
    slice_value: object = None


class Reader(Protocol):
    """How a step reads the upstream and writes the warehouse (``ductwork.sync``).

    ``options`` names the run options it takes (``mode``, ``reset``, ``window_days``);
    ``resumable`` says whether it keeps a resume point that ``--reset`` can forget; ``guards``
    names the blocking checks its kind of read calls for beyond every step's (see
    ``assets/checks.py``).
    """

    options: frozenset[str]
    resumable: bool
    guards: frozenset[str]

    def sync(self, steps: Sequence[Step], context: SyncContext) -> Iterator[StepResult]:
        """Run the steps (one, or a batch sharing this reader's kind) and report each."""
        ...


@dataclass(frozen=True)
class Warning:
    """A non-blocking check of a step: the stream's statement ``statement`` lists offending
    values (the check warns when it lists any), read once the assets in ``after`` are in."""

    name: str
    description: str
    statement: str
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class Step:
    """One Dagster asset of a stream: the asset's key (as kept in run history), what it
    reads and writes, and the assets it needs first.

    Steps of one stream, or of several, that name the same ``batch`` run as one Dagster step
    (a multi-asset), sharing one warehouse connection and one upstream client.
    """

    asset: str
    description: str
    reader: Reader
    table: Table
    after: tuple[str, ...] = ()
    batch: str | None = None
    kinds: frozenset[str] = frozenset({"api", "duckdb"})
    warnings: tuple[Warning, ...] = ()


class Serving(StrEnum):
    """How the read API answers a stream's paths (``serve/`` has one way per kind)."""

    CATALOG = "catalog"  # page lists by key, typed lookups, filters, held in memory
    PAGED_LIST = "paged list"  # a large list paged by number: pages sliced from a record file
    CURSOR_LIST = "cursor list"  # a large list paged by cursor: records read by position
    LOOKUP = "lookup"  # one record per query parameters
    DOCUMENT = "document"  # one whole answer, stored as served


@dataclass(frozen=True)
class Stream:
    """One stream of the registry.

    ``key`` is the member (or member pair) that identifies a record in the changes feed;
    ``path`` the upstream (and served) path of its list or document, and of every path below
    it; ``serves_below`` a prefix of further paths it answers (the catalog's unit lists and
    lookups), unless a stream's own path names them; ``sql`` the file in
    ``warehouse_sql/streams`` with its tables, comments, views and statements.

    ``personal_key`` marks a stream whose records hold personal data: the column that names a
    record's key (the feed's ``key``) in its tables, by which ``ductwork forget`` erases a
    record (``ductwork.erasure``); None for a stream without personal data. Only such a stream
    may keep its history shorter than the others (``DUCTWORK_HISTORY_DAYS_<STREAM>``).
    """

    name: str
    family: Family
    key: str
    path: str
    description: str
    cadence: Cadence
    shape: RecordShape
    steps: tuple[Step, ...]
    serving: Serving
    # Tables the stream writes beside its steps' own, which the read API serves from too.
    extra_tables: tuple[Table, ...] = ()
    open_access: bool = False  # served without a key (the spec declares no Authorization)
    records_in_text: bool = False  # the answer's ``data`` holds the records as a JSON text
    serves_below: str | None = None
    personal_key: str | None = None

    @property
    def personal(self) -> bool:
        """Whether its records hold personal data (names, emails, phones): ``ductwork forget``
        erases them, and their history may be kept shorter."""
        return self.personal_key is not None

    @property
    def sql(self) -> str:
        """The stream's SQL file, ``warehouse_sql/streams/<sql>.sql``."""
        return self.name.replace("-", "_")

    @property
    def tables(self) -> tuple[Table, ...]:
        """Every table the stream writes, each once (a slice of a table counts as the table)."""
        found: dict[str, Table] = {}
        for table in (*(step.table for step in self.steps), *self.extra_tables):
            found.setdefault(table.name, Table(table.name, table.key))
        return tuple(found.values())

    @property
    def assets(self) -> tuple[str, ...]:
        """Its Dagster assets' keys, in step order."""
        return tuple(step.asset for step in self.steps)

    @property
    def numbered_list(self) -> tuple[str, str] | None:
        """A large list's numbered table, built in every snapshot by the ``serving`` section
        of its SQL, and the base table its positions point into."""
        if self.serving not in (Serving.PAGED_LIST, Serving.CURSOR_LIST):
            return None
        base = self.steps[0].table.name
        return (f"serving_{base}", base)

    @property
    def feed_key_column(self) -> str | None:
        """For a list paged by number, whose list records are its changes feed's current
        records (``tests/test_feed_pages.py`` holds them equal): the base table's key column,
        by which the read API finds a feed page's records in the list's record file."""
        if self.serving != Serving.PAGED_LIST or len(self.steps[0].table.key) != 1:
            return None
        return self.steps[0].table.key[0]

    @property
    def resumable(self) -> bool:
        """Whether any of its steps keeps a resume point that a reset forgets."""
        return any(step.reader.resumable for step in self.steps)
