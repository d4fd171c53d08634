"""What analysts get from a synced snapshot: views, a data dictionary from the catalog, Parquet
exports (folder and object store) and the report page, checked in headless Chromium."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import duckdb
import pyarrow.parquet as pq
import pytest

from ductwork import snapshots
from ductwork.settings import HomeSettings
from ductwork.streams.registry import STREAMS
from pipelines.snapshot_relations import describe
from sandbox.server import SandboxHandle
from tests.conftest import ObjectStoreServer, resources_for
from tests.helpers.browser import rendered_dom
from tests.helpers.cli import ROOT, ductwork

VIEWS = {
    "pairings_expanded", "digital_assets_by_sku_type", "submittal_coverage", "leads_by_week",
    "lead_status_transitions", "lead_time_in_status", "discontinued_products_in_pairings",
}  # fmt: skip


def env_for(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "DUCTWORK_HOME": str(home), **extra}


def snapshot_counts(home: Path) -> dict[str, int]:
    _, con = snapshots.open_current(HomeSettings(home=home).snapshots_dir)
    with con:
        return {relation.name: relation.rows for relation in describe(con)}


def test_every_table_view_and_column_of_a_snapshot_has_a_comment(synced_home: Path) -> None:
    _, con = snapshots.open_current(HomeSettings(home=synced_home).snapshots_dir)
    with con:
        relations = describe(con)
    names = {r.name for r in relations}
    assert names >= VIEWS
    assert {"lead_history", "digital_asset_history", "snapshot_info", "serving_leads"} <= names
    missing = [r.name for r in relations if not r.comment]
    missing += [f"{r.name}.{c.name}" for r in relations for c in r.columns if not c.comment]
    assert not missing, f"add COMMENT ON for: {missing}"


def test_analyst_views_agree_with_the_tables_they_summarise(synced_home: Path) -> None:
    _, con = snapshots.open_current(HomeSettings(home=synced_home).snapshots_dir)

    def one(query: str) -> tuple:
        return con.execute(query).fetchall()[0]

    with con:
        assert one("SELECT count(*) FROM pairings_expanded") == one("SELECT count(*) FROM pairings")
        # Expanded slots carry the catalog's series and efficiency wherever the SKU resolves.
        assert one(
            "SELECT count(*) FROM pairings_expanded AS e JOIN units AS u "
            "ON u.sku = e.p1_sku AND u.unit_type = e.p1_unit_type "
            "WHERE e.p1_series IS DISTINCT FROM u.series_name"
        ) == (0,)
        assert (
            one("SELECT count(p1_seer2), count(p2_cooling_capacity_btuh) FROM pairings_expanded")[0]
            > 0
        )
        assert one("SELECT sum(leads) FROM leads_by_week") == one("SELECT count(*) FROM leads")
        assert one("SELECT sum(live_assets) FROM digital_assets_by_sku_type") == one(
            "SELECT count(*) FROM digital_assets WHERE deleted_at IS NULL"
        )
        with_data, without = one(
            "SELECT count(*) FILTER (has_submittal_data), count(*) FILTER (NOT has_submittal_data) "
            "FROM submittal_coverage"
        )
        assert with_data > 0 and without > 0
        assert one("SELECT count(*) FROM submittal_coverage WHERE has_submittal_data") == one(
            "SELECT count(*) FROM submittal_coverage AS c JOIN submittals AS s "
            "USING (request_key) WHERE s.found"
        )
        discontinued = con.execute(
            "SELECT d.sku, d.pairings, (SELECT count(DISTINCT relationship_id) "
            "FROM pairing_products AS pp WHERE pp.sku = d.sku AND pp.unit_type = d.unit_type) "
            "FROM discontinued_products_in_pairings AS d"
        ).fetchall()
        assert discontinued and all(shown == actual for _, shown, actual in discontinued)
        # A single sync: one stint per lead, no transitions yet.
        assert one("SELECT count(*) FROM lead_time_in_status") == one("SELECT count(*) FROM leads")
        assert one("SELECT count(*) FROM lead_status_transitions") == (0,)


# What DuckDB says when the sandbox, and nothing else, refuses a statement: the file system is
# off (enable_external_access), extensions cannot load, and the configuration is locked.
FILE_SYSTEM_OFF = "file system operations are disabled by configuration"
EXTENSIONS_OFF = "Loading external extensions is disabled through configuration"
LOCKED = "the configuration has been locked"


def refused_statements(tmp_path: Path, secret: Path, written: Path) -> dict[str, tuple[str, str]]:
    """What the analyst sandbox refuses: the statement, and the phrase of its refusal."""
    return {
        "read a file": (f"SELECT * FROM read_csv('{secret}')", FILE_SYSTEM_OFF),
        "read a file by name": (f"SELECT * FROM '{secret}'", FILE_SYSTEM_OFF),
        "list files": (f"SELECT * FROM glob('{tmp_path}/*')", FILE_SYSTEM_OFF),
        "write a file": (f"COPY (SELECT 1 AS a) TO '{written}'", FILE_SYSTEM_OFF),
        "attach a database": (f"ATTACH '{tmp_path / 'other.duckdb'}' AS other", FILE_SYSTEM_OFF),
        "export the database": (f"EXPORT DATABASE '{tmp_path / 'dump'}'", FILE_SYSTEM_OFF),
        "turn access back on": ("SET enable_external_access = true", LOCKED),
        "unlock": ("SET lock_configuration = false", LOCKED),
        "install an extension": ("INSTALL httpfs", FILE_SYSTEM_OFF),
        "load an extension": ("LOAD httpfs", EXTENSIONS_OFF),
    }


def test_sql_reads_no_file_writes_none_and_cannot_unlock_itself(
    synced_home: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("name\nsecret-marker-1234\n", encoding="utf-8")
    written = tmp_path / "written.csv"
    env = env_for(synced_home)
    for what, (query, refusal) in refused_statements(tmp_path, secret, written).items():
        done = ductwork("sql", query, "--format", "csv", env=env, timeout=120)
        assert done.returncode == 1, f"{what}: {done.stdout}{done.stderr}"
        assert "secret-marker" not in done.stdout + done.stderr, what
        assert done.stderr.startswith("ductwork: query failed:"), what
        assert done.stderr.count("\n") == 1, f"{what}: {done.stderr}"
        # Refused by the sandbox, not failing for another reason (no network, no such file).
        assert refusal in done.stderr, f"{what}: {done.stderr}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.csv"]
    # Parquet output goes through pyarrow, never through DuckDB's COPY.
    out = tmp_path / "out.parquet"
    copy = f"COPY (SELECT 1 AS a) TO '{written}' (FORMAT parquet)"
    done = ductwork("sql", copy, "--format", "parquet", "--output", str(out), env=env)
    assert done.returncode == 1 and not written.exists() and not out.exists(), done.stderr
    # Plain queries work as before.
    counted = ductwork("sql", "SELECT count(*) AS n FROM leads", "--format", "json", env=env)
    assert counted.returncode == 0, counted.stderr
    assert json.loads(counted.stdout) == [{"n": snapshot_counts(synced_home)["leads"]}]


def test_without_the_sandbox_extensions_fail_otherwise_so_the_phrases_prove_the_sandbox(
    tmp_path: Path,
) -> None:
    """On this offline machine INSTALL and LOAD fail whatever the configuration: only the
    phrase tells the sandbox's refusal from a failed download or a missing file."""
    unsandboxed = {
        "extension_directory": str(tmp_path / "extensions"),
        "custom_extension_repository": "http://127.0.0.1:9",  # nothing is downloaded
    }
    secret, written = tmp_path / "secret.csv", tmp_path / "written.csv"
    statements = refused_statements(tmp_path, secret, written)
    with duckdb.connect(config=unsandboxed) as con:
        for what in ("install an extension", "load an extension", "turn access back on"):
            query, refusal = statements[what]
            with pytest.raises(duckdb.Error) as failed:
                con.execute(query)
            assert refusal not in str(failed.value), what


# Sorting two million 128-character strings takes far more than 128 MB: DuckDB spills.
SPILLING_QUERY = (
    "SELECT sum(length(h))::BIGINT AS n FROM (SELECT repeat(md5(i::VARCHAR), 4) AS h "
    "FROM range(2000000) AS t(i) ORDER BY h DESC)"
)


def test_sql_spills_only_into_a_private_folder_of_its_own_within_its_limit(
    synced_home: Path, tmp_path: Path
) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = env_for(synced_home, TMPDIR=str(scratch), DUCTWORK_SQL_TEMP_LIMIT="2MB")
    where = (
        "SELECT current_setting('temp_directory') AS d, "
        "current_setting('max_temp_directory_size') AS m"
    )
    done = ductwork("sql", where, "--format", "json", env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    (settings,) = json.loads(done.stdout)
    spill = Path(settings["d"])
    assert spill.parent == scratch and spill.name.startswith("ductwork-sql-")
    assert settings["m"] == "1.9 MiB"  # 2 MB as DuckDB shows it
    assert list(scratch.iterdir()) == []  # removed when the command ended
    # Past its limit a spilling query fails in one line; within a larger one it runs.
    small_memory = {**env, "DUCTWORK_SQL_MEMORY_LIMIT": "128MB"}
    refused = ductwork("sql", SPILLING_QUERY, "--format", "csv", env=small_memory, timeout=120)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert refused.stderr.startswith(
        "ductwork: query failed: Out of Memory Error: failed to offload"
    )
    assert refused.stderr.count("\n") == 1
    roomy = {**small_memory, "DUCTWORK_SQL_TEMP_LIMIT": "1GiB"}
    done = ductwork("sql", SPILLING_QUERY, "--format", "csv", env=roomy, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.splitlines()[1]) == 2_000_000 * 128
    assert list(scratch.iterdir()) == []


def test_sql_and_export_output_files_are_private_to_their_owner(
    synced_home: Path, tmp_path: Path
) -> None:
    env = env_for(synced_home)
    for output in ("csv", "parquet"):
        out = tmp_path / f"units.{output}"
        done = ductwork(
            "sql", "SELECT * FROM units", "--format", output, "--output", str(out), env=env
        )
        assert done.returncode == 0, done.stderr
        assert stat.S_IMODE(out.stat().st_mode) == 0o600, output
    exported = tmp_path / "export"
    done = ductwork("export", "--to", str(exported), env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    modes = {
        str(path.relative_to(exported)): stat.S_IMODE(path.stat().st_mode)
        for path in [exported, *exported.rglob("*")]
    }
    assert modes["manifest.json"] == 0o600 and modes["leads/data.parquet"] == 0o600
    wrong = {
        name: f"{mode:o}"
        for name, mode in modes.items()
        if mode != (0o700 if (exported / name).is_dir() else 0o600)
    }
    assert wrong == {}


def test_docs_command_writes_the_dictionary_from_the_snapshot_catalog(
    synced_home: Path, tmp_path: Path
) -> None:
    out = tmp_path / "data-dictionary.md"
    done = ductwork("docs", "--out", str(out), env=env_for(synced_home))
    assert done.returncode == 0, done.stderr[-3000:]
    text = out.read_text(encoding="utf-8")
    for name in snapshot_counts(synced_home):
        assert f"## {name}\n" in text
        assert f"| [`{name}`](#{name}) |" in text
    assert "| `valid_to` | TIMESTAMP WITH TIME ZONE | yes | End of the version" in text
    committed = ROOT / "docs" / "data-dictionary.md"
    assert text == committed.read_text(encoding="utf-8"), (
        "docs/data-dictionary.md is stale: `ductwork docs --force` on a synced data folder "
        "writes it again"
    )


def test_the_analysts_page_lines_run_against_a_synced_snapshot(
    synced_home: Path, tmp_path: Path
) -> None:
    """The "Try it" lines of ``docs/analysts.md``, pasted as they are but for the data folder
    (the demo's there, the tests' synced one here), each command failing the script."""
    page = (ROOT / "docs" / "analysts.md").read_text(encoding="utf-8")
    heading = page.index("## Try it")
    start = page.index("```bash\n", heading) + len("```bash\n")
    first, rest = page[start : page.index("```", start)].split("\n", 1)
    assert first == "export DUCTWORK_HOME=.ductwork/demo"
    script = "\n".join(["set -euo pipefail", f"export DUCTWORK_HOME={synced_home}", rest])
    done = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "TMPDIR": str(tmp_path)},  # where its export goes (mktemp)
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    counts = snapshot_counts(synced_home)
    assert f"{counts['digital_assets']}" in done.stdout  # the assets as of the oldest publish
    for status in ("New", "Qualified"):
        assert status in done.stdout
    assert "manifest.json" in done.stdout and "leads_by_week" in done.stdout


def test_docs_command_without_a_snapshot_says_so(tmp_path: Path) -> None:
    done = ductwork("docs", "--out", str(tmp_path / "d.md"), env=env_for(tmp_path))
    assert done.returncode == 2 and "run a sync first" in done.stderr


def test_export_to_a_folder_writes_every_table_and_view_as_parquet_with_a_manifest(
    synced_home: Path, tmp_path: Path
) -> None:
    done = ductwork("export", "--to", str(tmp_path / "out"), env=env_for(synced_home))
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    counts = snapshot_counts(synced_home)
    assert {t["name"]: t["rows"] for t in manifest["tables"]} == counts
    assert (
        manifest["snapshot_version"]
        == snapshots.current(HomeSettings(home=synced_home).snapshots_dir).version
    )
    for table in manifest["tables"]:
        data = pq.read_table(tmp_path / "out" / table["path"])
        assert data.num_rows == table["rows"], table["name"]
        assert data.column_names == [c["name"] for c in table["schema"]]
    # Another engine reads the export back, the JSON records intact.
    with duckdb.connect() as con:
        path = str(tmp_path / "out" / "leads" / "data.parquet")
        parsed = con.execute(
            "SELECT count(*) FROM read_parquet(?) WHERE json_valid(record)", [path]
        ).fetchall()[0][0]
    assert parsed == counts["leads"]


def test_export_to_s3_writes_the_same_files_and_manifest(
    synced_home: Path, object_store: ObjectStoreServer
) -> None:
    env = env_for(synced_home, DUCTWORK_S3_ENDPOINT_URL=object_store.endpoint_url)
    prefix = "exports/nightly"
    done = ductwork("export", "--to", f"s3://{object_store.bucket}/{prefix}/", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    client = object_store.resource().client()
    body = client.get_object(Bucket=object_store.bucket, Key=f"{prefix}/manifest.json")["Body"]
    manifest = json.loads(body.read())
    counts = snapshot_counts(synced_home)
    assert {t["name"]: t["rows"] for t in manifest["tables"]} == counts
    listed = client.list_objects_v2(Bucket=object_store.bucket, Prefix=f"{prefix}/")
    keys = {item["Key"] for item in listed["Contents"]}
    assert keys == {f"{prefix}/manifest.json"} | {
        f"{prefix}/{t['path']}" for t in manifest["tables"]
    }
    obj = client.get_object(
        Bucket=object_store.bucket, Key=f"{prefix}/pairings_expanded/data.parquet"
    )
    assert pq.read_table(io.BytesIO(obj["Body"].read())).num_rows == counts["pairings_expanded"]


def test_export_to_a_missing_bucket_or_a_bad_url_fails_clearly(
    synced_home: Path, object_store: ObjectStoreServer
) -> None:
    env = env_for(synced_home, DUCTWORK_S3_ENDPOINT_URL=object_store.endpoint_url)
    bad = ductwork("export", "--to", "s3:///no-bucket", env=env)
    assert bad.returncode == 2 and "s3://BUCKET/PREFIX" in bad.stderr
    missing = ductwork("export", "--to", "s3://no-such-bucket-here/x", env=env)
    assert missing.returncode == 1 and "object store" in missing.stderr
    assert "Traceback" not in missing.stderr


@pytest.fixture(scope="module")
def home_with_runs(
    upstream: SandboxHandle,
    object_store: ObjectStoreServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """A data folder synced twice with its runs recorded in a Dagster instance under it."""
    from pipelines.definitions import ALL_CHECKS, SYNCED_AND_PUBLISHED

    home = tmp_path_factory.mktemp("report")
    dagster_home = HomeSettings(home=home).dagster_home
    dagster_home.mkdir(parents=True)
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        for _ in range(2):
            result = dg.materialize(
                [*SYNCED_AND_PUBLISHED, *ALL_CHECKS],
                resources=resources_for(home, upstream.url, object_store),
                instance=instance,
            )
            assert result.success
    return home


def test_report_page_shows_its_charts_in_headless_chromium(
    home_with_runs: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report.html"
    done = ductwork("report", "--out", str(out), env=env_for(home_with_runs))
    assert done.returncode == 0, done.stderr[-3000:]
    page = out.read_text(encoding="utf-8")
    assert "<script src=" not in page  # self-contained: plotly.js is inline
    assert "crm_leads" in page and "Lead funnel" in page
    dom = rendered_dom(out.as_uri())
    # One rendered plotly chart per stream, the freshness chart and the funnel.
    streams = dom.count('class="main-svg"')
    assert dom.count("plot-container") >= 10
    assert streams >= 2 * 10, streams  # plotly draws two main-svg layers per chart
    assert "funnel" in dom and "requests" in dom and "retries" in dom


def test_a_report_after_one_sync_gives_numbers_the_data_age_and_the_historys_start(
    synced_home: Path, tmp_path: Path
) -> None:
    """After one ``ductwork sync``: a stream synced once is a line of numbers, not a chart of
    one point; the data age of every stream and the records the history begins with are
    tables."""
    out = tmp_path / "one-sync.html"
    done = ductwork("report", "--out", str(out), env=env_for(synced_home))
    assert done.returncode == 0, done.stderr[-3000:]
    page = out.read_text(encoding="utf-8")
    assert page.count("One sync so far, at") >= len(STREAMS)
    assert "rows over time" not in page  # no stream chart of a single point
    age = page[page.index("<h3>Data age</h3>") :]
    for stream in STREAMS:
        assert f"<td>{stream.name}</td>" in age
    changes = page[page.index("<h3>Changes per publish</h3>") :]
    assert "No change logged yet: the history begins at publish #1" in changes
    assert "<td>products</td>" in changes


def test_changes_of_several_publishes_are_drawn_and_of_one_are_listed() -> None:
    """Unit test of the page's rendering (no instance, no snapshot): the chart of changes is
    drawn only when there is more than one publish to draw."""
    from pipelines.report import PublishChanges, SnapshotFacts, render

    at = datetime(2026, 11, 27, 8, 0, tzinfo=UTC)
    one = [PublishChanges(2, at, "leads", 30, 1)]
    two = [*one, PublishChanges(3, at + timedelta(minutes=15), "leads", 12, 0)]
    listed = render({}, SnapshotFacts(changes=one), at)
    assert "One publish with changes so far" in listed and "Changes per publish, by" not in listed
    drawn = render({}, SnapshotFacts(changes=two), at)
    assert "Changes per publish, by stream" in drawn and "#3 11-27 08:15" in drawn
