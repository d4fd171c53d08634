"""Warehouse digital assets, generated in bulk (a million at large scale) and pre-serialised.

Every tenth asset belongs to a bulk import: hundreds of assets share one ``updatedAt``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from sandbox.compact_json import dumps_compact as dumps
from sandbox.draws import Draws
from sandbox.timeline import DAY_MS, SPAN_MS, stamp

Record = dict[str, Any]

ASSET_TYPES = ("Manual", "Brochure", "Spec Sheet", "Submittal", "Image", "Video")
MIME = {
    "Manual": "application/pdf",
    "Brochure": "application/pdf",
    "Spec Sheet": "application/pdf",
    "Submittal": "application/pdf",
    "Image": "image/png",
    "Video": "video/mp4",
}
LANGUAGES = ("en", "en", "en", "es", "fr-CA")
TITLE_TAILS = ("", "", "", " (Español)", " – rev B", " & wiring")
ASSETS_PER_BULK_INSTANT = 200


def asset_key(updated_at: str, asset_id: str) -> str:
    """Sort key of an asset: ``updatedAt``, a space, ``assetId``.

    ``updatedAt`` always has the same length, so comparing keys compares the pair
    (``updatedAt``, ``assetId``) by UTF-8 byte order, as the contract orders the list.
    """
    return f"{updated_at} {asset_id}"


def make_asset(
    draws: Draws, number: int, skus: Sequence[str], updated_at: str, created_at: str
) -> Record:
    """One asset record with the contract's members (and now and then an unknown one)."""
    kind = draws.pick(ASSET_TYPES)
    asset_id = f"DA-{number}"
    record: Record = {
        "assetId": asset_id,
        "sku": None if draws.percent(5) else draws.pick(skus),
        "assetType": kind,
        "title": f"{kind} {number}{draws.pick(TITLE_TAILS)}",
        "url": f"https://cdn.hvac.example/assets/{asset_id}",
        "mimeType": MIME[kind],
        "language": None if draws.percent(1) else draws.pick(LANGUAGES),
        "fileSizeBytes": draws.between(10_000, 50_000_000),
        "createdAt": created_at,
        "updatedAt": updated_at,
    }
    if draws.percent(2):
        record["checksum"] = f"{draws.below(1 << 64):016x}"
    return record


def make_assets(
    rng: random.Random, count: int, skus: Sequence[str]
) -> tuple[list[str], list[bytes]]:
    """``count`` assets as (sorted keys, JSON bodies in the same order)."""
    bulk = [rng.randrange(SPAN_MS) for _ in range(max(1, count // (10 * ASSETS_PER_BULK_INSTANT)))]
    keys: list[str] = []
    bodies: list[bytes] = []
    for number in range(count):
        draws = Draws(rng.getrandbits(384))
        updated_ms = bulk[draws.below(len(bulk))] if number % 10 == 0 else draws.below(SPAN_MS)
        created_ms = max(0, updated_ms - draws.below(120 * DAY_MS))
        record = make_asset(draws, number, skus, stamp(updated_ms), stamp(created_ms))
        keys.append(asset_key(record["updatedAt"], record["assetId"]))
        bodies.append(dumps(record))
    order = sorted(range(count), key=keys.__getitem__)
    return [keys[i] for i in order], [bodies[i] for i in order]
