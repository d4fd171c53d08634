"""The serving ceiling: a bare Starlette app answering fixed answers.

The answers are read once from the JSON file named by ``BENCH_CEILING_BODIES``: an object of
route name to ``{"status", "headers", "body_b64"}`` copied from real answers of ductwork's read
API (a SKU lookup, its gzip-encoded form, a 404, a 304, a list page...), so the ceiling answers
the same statuses and as many bytes as the read API does, without doing any work.

    BENCH_CEILING_BODIES=bodies.json uvicorn bench.ceiling_app:app --workers 2
"""

from __future__ import annotations

import base64
import json
import os

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

with open(os.environ["BENCH_CEILING_BODIES"], encoding="utf-8") as _file:
    ANSWERS = json.load(_file)


def _fixed(name: str, answer: dict) -> Route:
    body = base64.b64decode(answer["body_b64"])
    status = int(answer["status"])
    headers = dict(answer.get("headers") or {})

    async def fixed(request: Request) -> Response:
        return Response(body, status_code=status, headers=headers, media_type="application/json")

    return Route(f"/{name}/{{rest:path}}", fixed)


app = Starlette(routes=[_fixed(name, answer) for name, answer in ANSWERS.items()])
