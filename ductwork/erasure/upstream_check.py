"""Whether the upstream still serves records the mirror is asked to forget: a record the
upstream still serves would land again at the next sync, unless it is suppressed."""

from __future__ import annotations

import asyncio

from ductwork.contract.encoding import quote_sku
from ductwork.settings import UpstreamSettings
from ductwork.streams.model import Stream
from ductwork.sync.documents import Document
from ductwork.upstream.client import UpstreamClient


def still_served(stream: Stream, keys: list[str], settings: UpstreamSettings) -> list[str]:
    """The keys of ``stream`` the upstream still serves, in the order given: for a stream read
    from one answer (contractors), those its answer still holds; for any other (leads), those
    whose record's own path (``<path>/<key>``) answers 200 rather than 404."""
    return asyncio.run(_still_served(stream, keys, settings))


async def _still_served(stream: Stream, keys: list[str], settings: UpstreamSettings) -> list[str]:
    client = UpstreamClient(settings.upstream_url, settings.upstream_api_key.get_secret_value())
    reader = stream.steps[0].reader
    async with client:
        if isinstance(reader, Document):
            answer = await client.get(reader.path, auth=reader.auth, parse_json=True)
            records, _ = reader.parse(answer.json())
            listed = {str(record.get(stream.key)) for record in records}
            return [key for key in keys if key in listed]
        found = []
        for key in keys:
            answer = await client.get(
                f"{stream.path}/{quote_sku(key)}", accept=frozenset({200, 404}), parse_json=True
            )
            if answer.status == 200:
                found.append(key)
        return found
