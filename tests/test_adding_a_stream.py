"""The documentation's "Adding a stream" (``docs/adding-a-stream.md``) holds: a copy of the
checkout gets a new stream in the registry (its declaration and its SQL) and in the sandbox
alone, and every command a user runs picks it up: ``ductwork sync --help`` lists it, ``ductwork
sync`` syncs it, ``ductwork serve`` answers its path, ``ductwork docs`` documents its table,
and the Dagster UI shows it in its asset graph.

Everything runs as processes from the copy (``PYTHONPATH`` and the working folder point at it),
the sandbox included, so the copy's code is what runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from ductwork.contract.encoding import loads
from ductwork.settings import upstream_environment
from pipelines.processes import wait_until_answering
from sandbox.local_server import free_socket
from tests.conftest import SEED, UPSTREAM_KEY, ObjectStoreServer
from tests.helpers.cli import ROOT, dagster_dev, ductwork
from tests.helpers.serve_process import serving_process

PATH = "/internal/v1.0/products/warranty-terms"
UI_START_LIMIT_S = 240.0
# The three changes the page walks through, in its words.
DECLARATION = """

WARRANTY_TERMS_PATH = f"{paths.INTERNAL_PREFIX}/products/warranty-terms"
WARRANTY_TERMS_RECORD = RecordShape(required={"code": str, "years": int, "covers": str})
WARRANTY_TERM_TABLE = Table("warranty_terms", ("code",))
WARRANTY_TERMS = Stream(
    name="warranty-terms",
    family=Family.INTERNAL,
    key="code",
    path=WARRANTY_TERMS_PATH,
    description="Warranty terms by code.",
    cadence=NIGHTLY,
    shape=WARRANTY_TERMS_RECORD,
    steps=(
        Step(
            asset="internal_warranty_terms",
            description="Warranty terms (/internal/v1.0/products/warranty-terms).",
            reader=Document(
                WARRANTY_TERMS_PATH,
                one_row_each(
                    WARRANTY_TERM_TABLE,
                    Columns(("ordinal", "int32"), ("code", "string"), ("years", "int64"),
                            ("record", "string"), ("synced_at", "timestamp")),
                    lambda term: {"code": term["code"], "years": term.get("years")},
                ),
                WARRANTY_TERMS_RECORD,
            ),
            table=WARRANTY_TERM_TABLE,
        ),
    ),
    serving=Serving.DOCUMENT,
)
"""
SQL = """-- name: tables
CREATE TABLE IF NOT EXISTS warranty_terms (
    ordinal    INTEGER NOT NULL,     -- position in the upstream's answer
    code       VARCHAR PRIMARY KEY,
    years      BIGINT,
    record     JSON NOT NULL,
    synced_at  TIMESTAMPTZ NOT NULL
);

-- name: comments
COMMENT ON TABLE warranty_terms IS 'Warranty terms, one row per code.';
COMMENT ON COLUMN warranty_terms.ordinal IS 'Position in the upstream''s answer, from 0.';
COMMENT ON COLUMN warranty_terms.code IS 'Warranty code.';
COMMENT ON COLUMN warranty_terms.years IS 'Years covered.';
COMMENT ON COLUMN warranty_terms.record IS 'The term exactly as received (JSON).';
COMMENT ON COLUMN warranty_terms.synced_at IS 'When the sync stored the row.';

-- name: as_of
CREATE OR REPLACE MACRO warranty_terms_as_of(v) AS TABLE
SELECT code AS key, record FROM warranty_terms_at(v);

-- name: served
SELECT '{"success":true,"data":['
    || coalesce(string_agg(record::VARCHAR, ',' ORDER BY ordinal), '') || ']}'
FROM warranty_terms;
"""
SANDBOX = '''

from ductwork.streams.internal import WARRANTY_TERMS_PATH


def warranty_terms(state: SandboxState, query: QueryParams, _: str) -> bytes:
    """The warranty terms: three of them, the same for every seed."""
    terms = [{"code": f"W{n}", "years": n, "covers": "compressor"} for n in (1, 5, 10)]
    return dumps({"success": True, "data": terms})


EXACT[WARRANTY_TERMS_PATH] = warranty_terms
'''


def edit(path: Path, old: str, new: str) -> None:
    """Replace ``old`` (which must be there) by ``new`` in ``path``."""
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def copy_with_a_new_stream(copy: Path) -> None:
    """The checkout's files, with the page's three changes made."""
    ignored = shutil.ignore_patterns(
        ".git", ".venv", ".tools", ".ductwork", "__pycache__", ".pytest_cache", ".ruff_cache"
    )
    shutil.copytree(ROOT, copy, ignore=ignored)
    family = copy / "ductwork" / "streams" / "internal.py"
    family.write_text(family.read_text(encoding="utf-8") + DECLARATION, encoding="utf-8")
    registry = copy / "ductwork" / "streams" / "registry.py"
    edit(registry, "    MANUALS,\n)", "    MANUALS,\n    WARRANTY_TERMS,\n)")
    edit(
        registry,
        "from ductwork.streams.internal import CONTRACTORS, INDOOR_MODELS, MANUALS\n",
        "from ductwork.streams.internal import (\n"
        "    CONTRACTORS, INDOOR_MODELS, MANUALS, WARRANTY_TERMS,\n)\n",
    )
    (copy / "warehouse_sql" / "streams" / "warranty_terms.sql").write_text(SQL, encoding="utf-8")
    sandbox = copy / "sandbox" / "app.py"
    sandbox.write_text(sandbox.read_text(encoding="utf-8") + SANDBOX, encoding="utf-8")


@contextmanager
def sandbox_of(copy: Path, env: dict[str, str]) -> Iterator[str]:
    """The copy's sandbox upstream, as a process on a free port; its URL."""
    with free_socket() as sock:
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli", "sandbox", "--port", str(port),
         "--seed", str(SEED), "--scale", "tiny", "--api-key", UPSTREAM_KEY],
        cwd=copy, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(f"{url}/_sandbox/stats", process, timeout_s=120)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def added(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("checkout") / "ductwork"
    copy_with_a_new_stream(copy)
    return copy


def test_a_stream_added_to_the_registry_and_the_sandbox_is_synced_served_and_documented(
    added: Path, object_store: ObjectStoreServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    base = {**os.environ, "PYTHONPATH": str(added), "DUCTWORK_HOME": str(home)}

    helped = ductwork("sync", "--help", env=base, root=added, timeout=120)
    assert helped.returncode == 0, helped.stderr
    assert "warranty-terms" in " ".join(helped.stdout.split())

    with sandbox_of(added, base) as upstream_url:
        env = {
            **base,
            **upstream_environment(
                upstream_url, UPSTREAM_KEY, object_store.endpoint_url, object_store.bucket
            ),
        }
        synced = ductwork("sync", env=env, root=added)
        assert synced.returncode == 0, synced.stdout[-3000:] + synced.stderr[-3000:]
        assert "internal_warranty_terms" in synced.stdout
        upstream_body = httpx.get(
            f"{upstream_url}{PATH}", headers={"Authorization": f"Bearer {UPSTREAM_KEY}"}
        ).content

    rows = ductwork(
        "sql", "SELECT code, years FROM warranty_terms ORDER BY code", "--format", "json",
        env=base, root=added,
    )  # fmt: skip
    assert rows.returncode == 0, rows.stderr
    assert loads(rows.stdout) == [
        {"code": "W1", "years": 1}, {"code": "W10", "years": 10}, {"code": "W5", "years": 5}
    ]  # fmt: skip

    created = ductwork("keys", "create", "reader", "--scope", "internal", env=base, root=added)
    key = created.stdout.strip().splitlines()[-1]
    with serving_process(home, 1, {"PYTHONPATH": str(added)}, root=added) as api:
        answer = httpx.get(f"{api.url}{PATH}", headers={"Authorization": f"Bearer {key}"})
        refused = httpx.get(f"{api.url}{PATH}")
    assert answer.status_code == 200
    assert answer.content == upstream_body  # byte for byte, as the upstream answered
    assert refused.status_code == 401

    dictionary = tmp_path / "dictionary.md"
    documented = ductwork("docs", "--out", str(dictionary), env=base, root=added)
    assert documented.returncode == 0, documented.stderr
    text = dictionary.read_text(encoding="utf-8")
    assert "## warranty_terms" in text and "Warranty terms, one row per code." in text


def test_a_stream_added_to_the_registry_shows_in_the_dagster_ui_asset_graph(
    added: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": str(added), "DUCTWORK_HOME": str(tmp_path / "home")}
    query = "{ assetNodes { assetKey { path } groupName } }"
    with dagster_dev(env, UI_START_LIMIT_S, root=added) as url:
        found = httpx.post(f"{url}/graphql", json={"query": query}, timeout=60).json()
    nodes = {tuple(node["assetKey"]["path"]): node for node in found["data"]["assetNodes"]}
    assert ("internal_warranty_terms",) in nodes, sorted(nodes)
    assert nodes[("internal_warranty_terms",)]["groupName"] == "internal"
