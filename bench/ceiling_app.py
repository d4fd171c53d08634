"""The serving ceiling: a bare Starlette app answering fixed JSON bodies.

The bodies are read once from the JSON file named by ``BENCH_CEILING_BODIES`` (an object of
route name to body text, e.g. a real SKU lookup answer and a real 100-record list page), so the
ceiling answers as many bytes as ductwork's read API does, without doing any work.

    BENCH_CEILING_BODIES=bodies.json uvicorn bench.ceiling_app:app --workers 2
"""

from __future__ import annotations

import json
import os

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

with open(os.environ["BENCH_CEILING_BODIES"], encoding="utf-8") as _file:
    BODIES = {name: text.encode() for name, text in json.load(_file).items()}


def _fixed(name: str) -> Route:
    body = BODIES[name]

    async def answer(request: Request) -> Response:
        return Response(body, media_type="application/json")

    return Route(f"/{name}/{{rest:path}}", answer)


app = Starlette(routes=[_fixed(name) for name in BODIES])
