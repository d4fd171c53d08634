"""The serving part's request mixes, and the ceiling's copies of their answers.

Each mix is a list of requests for ``ductwork serve`` and a parallel list for the ceiling, one
ceiling route per kind of answer in the mix, whose fixed answer (status, headers, body) is
copied from a real answer of the read API: the ceiling sends the same statuses and bytes.

- SKU lookups: of every ten, seven found, one asking for gzip (``Accept-Encoding: gzip``),
  one revalidated with its own ETag (``If-None-Match``: a 304) and one unknown (a 404).
- List pages (count=100): indoor units, digital assets, digital assets filtered by
  ``updatedAfter``, and both lists asking for gzip.
- At large: every digital-asset list page (count=100), a fifth asking for gzip: about 300 MB
  of records. A plain page is a slice of the record file every worker maps
  (``serve/record_file.py``), not a read through the list cache; a gzip page is the same slice,
  compressed at its first request in a worker and kept in the gzip answer cache
  (``DUCTWORK_SERVE_GZIP_CACHE_MB``) while it fits.
"""

from __future__ import annotations

import asyncio
import base64
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import orjson

from bench.raw_http import RawPool
from ductwork.contract.encoding import quote_sku

GZIP = "Accept-Encoding: gzip"
UNITS = "/products/v2.0/indoor-units"
ASSETS = "/warehouse/v1.0/digital-assets"


@dataclass
class Mix:
    """One mix: its requests to ductwork and to the ceiling, and the ceiling's answers."""

    name: str
    describe: str
    paced: bool = False
    ours: list[str] = field(default_factory=list)
    ceiling: list[str] = field(default_factory=list)
    routes: list[str] = field(default_factory=list)
    ceiling_answers: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, route: str, path: str, extra: str = "") -> None:
        """One request: ``path`` to ductwork, the ceiling's ``route`` for the same answer."""
        suffix = f"\t{extra}" if extra else ""
        self.ours.append(path + suffix)
        self.ceiling.append(f"/{route}/{len(self.ceiling)}{suffix}")
        self.routes.append(route)

    def expected_statuses(self) -> dict[str, float]:
        """The share of each status among the mix's answers (its requests are sent round
        robin, so a run's answers should come in about these shares)."""
        counts = Counter(str(self.ceiling_answers[route]["status"]) for route in self.routes)
        return {status: count / len(self.routes) for status, count in sorted(counts.items())}


class SampleRefused(RuntimeError):
    """The read API did not answer a sample as the mix needs it (a 401 or a 503, say): the
    bench stops rather than measure a ceiling that copies the failure."""


class Sampler:
    """Real answers of the read API, as bytes on the wire."""

    def __init__(self, url: str, key: str) -> None:
        self.url = url
        self.key = key

    def answer(self, path: str, extra: str = "", expect: int = 200) -> dict[str, Any]:
        """The status, the headers a ceiling must repeat and the raw body of ``GET path``;
        SampleRefused unless the status is ``expect`` (the ceiling would copy any answer)."""
        found = asyncio.run(self._answer(path, extra))
        if found["status"] != expect:
            raise SampleRefused(f"GET {path} answered {found['status']}, not {expect}")
        return found

    async def _answer(self, path: str, extra: str) -> dict[str, Any]:
        async with RawPool(self.url, 1, {"Authorization": f"Bearer {self.key}"}) as pool:
            lines = "".join(f"{h}\r\n" for h in extra.split("\\n") if h)
            status, head, body = await pool.send(pool.head(path, lines.encode()))
        kept = {}
        for line in head.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.lower() in ("content-encoding", "etag", "vary"):
                kept[name] = value.strip()
        return {"status": status, "headers": kept, "body_b64": base64.b64encode(body).decode()}

    def etags(self, paths: list[str]) -> dict[str, str]:
        """The ETag of each path's answer (one connection for all)."""
        return asyncio.run(self._etags(paths))

    async def _etags(self, paths: list[str]) -> dict[str, str]:
        found = {}
        async with RawPool(self.url, 1, {"Authorization": f"Bearer {self.key}"}) as pool:
            for path in paths:
                _, head, _ = await pool.send(pool.head(path, b""))
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    name, _, value = line.partition(":")
                    if name.lower() == "etag":
                        found[path] = value.strip()
        return found

    def json(self, path: str) -> Any:
        """The parsed body of ``GET path``."""
        return orjson.loads(base64.b64decode(self.answer(path)["body_b64"]))


def _snapshot_facts(home: Path) -> tuple[list[str], int, int]:
    from ductwork import snapshots
    from ductwork.settings import HomeSettings

    snap = snapshots.current(HomeSettings(home=home).snapshots_dir)
    assert snap is not None, "no snapshot to serve"
    with duckdb.connect(str(snap.path), read_only=True) as con:
        skus = [row[0] for row in con.execute("SELECT sku FROM units ORDER BY sku").fetchall()]
        indoor = con.execute(
            "SELECT count(*) FROM units WHERE unit_type = 'indoor-units'"
        ).fetchall()[0][0]
        assets = con.execute(
            "SELECT count(*) FROM digital_assets WHERE deleted_at IS NULL"
        ).fetchall()[0][0]
    return skus, indoor, assets


def _total_pages(body: dict[str, Any]) -> int:
    pagination = body.get("pagination") or {}
    return int(pagination.get("totalPages") or 1)


def lookups(sampler: Sampler, skus: list[str]) -> Mix:
    """SKU lookups: 7 found, 1 gzip, 1 304, 1 404 of every ten."""
    mix = Mix(
        "SKU lookups (7/10 found, 1/10 gzip, 1/10 304, 1/10 404)",
        "every SKU in turn; of every ten, seven plain, one with `Accept-Encoding: gzip`, one "
        "with `If-None-Match` set to its own ETag, one for an unknown SKU",
        paced=True,
    )
    middle = f"/products/v2.0/units/{quote_sku(skus[len(skus) // 2])}"
    found = sampler.answer(middle)
    etag = found["headers"].get("etag") or found["headers"].get("ETag", "")
    revalidate = f"If-None-Match: {etag}"
    missing = "/products/v2.0/units/NO-SUCH-SKU-0"
    paths = [f"/products/v2.0/units/{quote_sku(sku)}" for sku in skus]
    etags = sampler.etags([path for index, path in enumerate(paths) if index % 10 == 8])
    mix.ceiling_answers = {
        "l200": found,
        "lgz": sampler.answer(middle, GZIP),
        "l304": sampler.answer(middle, revalidate, expect=304),
        "l404": sampler.answer(missing, expect=404),
    }
    for index, path in enumerate(paths):
        slot = index % 10
        if slot == 7:
            mix.add("lgz", path, GZIP)
        elif slot == 8:
            mix.add("l304", path, f"If-None-Match: {etags[path]}")
        elif slot == 9:
            mix.add("l404", f"/products/v2.0/units/NO-SUCH-SKU-{index}")
        else:
            mix.add("l200", path)
    return mix


def list_pages(sampler: Sampler, indoor: int, assets: int) -> Mix:
    """count=100 pages of indoor units and digital assets, filtered ones, gzip ones."""
    mix = Mix(
        "list pages, count=100 (units, assets, filtered assets, 2/5 gzip)",
        "in turn: an indoor-unit page, a digital-asset page, a digital-asset page filtered "
        "by `updatedAfter`, an indoor-unit page and a digital-asset page with "
        "`Accept-Encoding: gzip`",
    )
    unit_pages = max(1, math.ceil(indoor / 100))
    asset_pages = max(1, math.ceil(assets / 100))
    probe = sampler.json(f"{ASSETS}?count=1&page={max(1, assets // 2)}")
    records = probe.get("data") or [{}]
    after = records[0].get("updatedAt") or "2000-01-01T00:00:00Z"
    filtered = f"{ASSETS}?count=100&updatedAfter={after}"
    filtered_pages = _total_pages(sampler.json(filtered + "&page=1"))
    middle_unit = f"{UNITS}?count=100&page={unit_pages // 2 + 1}"
    middle_asset = f"{ASSETS}?count=100&page={asset_pages // 2 + 1}"
    mix.ceiling_answers = {
        "u": sampler.answer(middle_unit),
        "a": sampler.answer(middle_asset),
        "f": sampler.answer(f"{filtered}&page={filtered_pages // 2 + 1}"),
        "ugz": sampler.answer(middle_unit, GZIP),
        "agz": sampler.answer(middle_asset, GZIP),
    }
    for index in range(max(unit_pages, asset_pages) * 5):
        turn, slot = divmod(index, 5)
        unit_page = turn % unit_pages + 1
        asset_page = turn % asset_pages + 1
        if slot == 0:
            mix.add("u", f"{UNITS}?count=100&page={unit_page}")
        elif slot == 1:
            mix.add("a", f"{ASSETS}?count=100&page={asset_page}")
        elif slot == 2:
            mix.add("f", f"{filtered}&page={turn % filtered_pages + 1}")
        elif slot == 3:
            mix.add("ugz", f"{UNITS}?count=100&page={unit_page}", GZIP)
        else:
            mix.add("agz", f"{ASSETS}?count=100&page={asset_page}", GZIP)
    return mix


def large_asset_pages(sampler: Sampler, assets: int) -> Mix:
    """Every digital-asset page (count=100), a fifth of them asking for gzip."""
    mix = Mix(
        "digital-asset list pages at large, count=100, every page (1/5 gzip)",
        "every page of the digital-asset list in turn (each a slice of the record file the "
        "workers map), one in five with `Accept-Encoding: gzip` (that slice, compressed at its "
        "first request in a worker)",
    )
    pages = max(1, math.ceil(assets / 100))
    middle = f"{ASSETS}?count=100&page={pages // 2 + 1}"
    mix.ceiling_answers = {"A": sampler.answer(middle), "Agz": sampler.answer(middle, GZIP)}
    for page in range(1, pages + 1):
        if page % 5 == 0:
            mix.add("Agz", f"{ASSETS}?count=100&page={page}", GZIP)
        else:
            mix.add("A", f"{ASSETS}?count=100&page={page}")
    return mix


def mixes_for(scale: str, home: Path, url: str, key: str) -> list[Mix]:
    """The mixes measured at ``scale``: lookups and list pages at the first scale, every
    digital-asset page at large."""
    sampler = Sampler(url, key)
    skus, indoor, assets = _snapshot_facts(home)
    if scale == "large":
        return [large_asset_pages(sampler, assets)]
    return [lookups(sampler, skus), list_pages(sampler, indoor, assets)]
