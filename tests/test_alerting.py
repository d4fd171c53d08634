"""A failed run reaches the operator's webhook."""

from __future__ import annotations

from collections.abc import Callable

import dagster as dg
import pytest

from ductwork.contract.encoding import loads
from ductwork.local_server import serving
from pipelines.sensors import alert_on_run_failure


def test_a_failed_run_is_posted_to_the_webhook_with_its_job_and_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    received: list[dict] = []

    async def webhook(scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        received.append(loads(body))
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    @dg.op
    def explode() -> None:
        raise RuntimeError("the upstream went away")

    @dg.job
    def doomed() -> None:
        explode()

    with dg.DagsterInstance.ephemeral() as instance, serving(webhook) as url:
        monkeypatch.setenv("DUCTWORK_ALERT_WEBHOOK_URL", f"{url}/hook")
        result = doomed.execute_in_process(instance=instance, raise_on_error=False)
        context = dg.build_run_status_sensor_context(
            sensor_name="alert_on_run_failure",
            dagster_instance=instance,
            dagster_run=result.dagster_run,
            dagster_event=result.get_run_failure_event(),
        ).for_run_failure()
        alert_on_run_failure(context)
    assert len(received) == 1
    assert received[0]["job"] == "doomed"
    assert received[0]["run_id"] == result.run_id
    assert "failed" in received[0]["text"]
