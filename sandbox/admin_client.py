"""A client of the sandbox's admin API (``sandbox.admin``): what the tests and the benchmarks
ask of the upstream between two syncs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class SandboxAdmin:
    """The admin API of the sandbox at ``url``, called with the service's key."""

    url: str
    key: str
    timeout_s: float = 300.0

    def stats(self) -> dict[str, Any]:
        """Record counts and counters (``GET /_sandbox/stats``)."""
        return self._call("GET", "stats")

    def mutate(self, counts: Mapping[str, int]) -> dict[str, Any]:
        """Change that many records of each kind (``POST /_sandbox/mutate``); the ids touched."""
        return self._call("POST", "mutate", dict(counts))

    def delete_leads(self, ids: list[str]) -> list[str]:
        """Delete those leads (``POST /_sandbox/delete``); the ids deleted."""
        return self._call("POST", "delete", {"leads": ids})["leads"]

    def _call(self, method: str, name: str, body: object = None) -> Any:
        answer = httpx.request(
            method,
            f"{self.url}/_sandbox/{name}",
            json=body,
            headers={"Authorization": f"Bearer {self.key}"},
            timeout=self.timeout_s,
        )
        answer.raise_for_status()
        return answer.json()
