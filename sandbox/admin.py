"""The sandbox's admin API under /_sandbox/ (same key, never faulted): faults, mutations,
stats and the request log."""

from __future__ import annotations

from dataclasses import asdict, fields

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ductwork.contract.encoding import dumps, loads
from sandbox.state import Faults, SandboxState

PREFIX = "/_sandbox"


def admin_routes(state: SandboxState) -> list[Route]:
    """Routes of the admin API."""

    def authorised(request: Request) -> bool:
        return request.headers.get("authorization", "") == f"Bearer {state.api_key}"

    def answer(body: object, status: int = 200) -> Response:
        return Response(dumps(body), status, media_type="application/json")

    async def faults(request: Request) -> Response:
        if not authorised(request):
            return answer({"error": "unauthorized"}, 401)
        if request.method == "PUT":
            wanted = loads(await request.body())
            known = {f.name for f in fields(Faults)}
            unknown = sorted(set(wanted) - known)
            if unknown:
                return answer({"error": f"unknown fault settings {unknown}"}, 400)
            state.faults = Faults(**{**asdict(state.faults), **wanted})
        return answer(asdict(state.faults))

    async def mutate(request: Request) -> Response:
        if not authorised(request):
            return answer({"error": "unauthorized"}, 401)
        return answer(state.mutate(loads(await request.body())))

    async def stats(request: Request) -> Response:
        if not authorised(request):
            return answer({"error": "unauthorized"}, 401)
        return answer({
            "products": sum(len(units) for units in state.units.values()),
            "pairings": len(state.pairings),
            "assets": len(state.assets.keys),
            "leads": len(state.leads.keys),
            "submittals": len(state.submittals),
            "requests": state.requests_seen,
            "mutations": state.mutations,
        })  # fmt: skip

    async def request_log(request: Request) -> Response:
        if not authorised(request):
            return answer({"error": "unauthorized"}, 401)
        return answer([list(entry) for entry in state.request_log])

    return [
        Route(f"{PREFIX}/faults", faults, methods=["GET", "PUT"]),
        Route(f"{PREFIX}/mutate", mutate, methods=["POST"]),
        Route(f"{PREFIX}/stats", stats, methods=["GET"]),
        Route(f"{PREFIX}/log", request_log, methods=["GET"]),
    ]
