"""Reading the changes feed as a consumer does: a whole walk from a token."""

from __future__ import annotations

import httpx

CHANGES = "/_ductwork/v1/changes/"


def walk_feed(
    api_url: str, key: str, stream: str, since: str | None, limit: int = 500
) -> tuple[list[dict], str]:
    """A whole walk of ``stream``'s feed from ``since`` (from the start when None), ``limit``
    changes a page: its changes, and the token after them."""
    changes: list[dict] = []
    params: dict[str, str | int] = {} if since is None else {"since": since}
    while True:
        answer = httpx.get(
            f"{api_url}{CHANGES}{stream}",
            params={**params, "limit": limit},
            headers={"Authorization": f"Bearer {key}"},
            timeout=60,
        )
        assert answer.status_code == 200, answer.text
        body = answer.json()
        changes += body["changes"]
        if not body["hasMore"]:
            return changes, body["next"]
        params = {"since": body["next"]}
