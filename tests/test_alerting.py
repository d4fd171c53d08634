"""A failed run reaches the operator's webhook; the webhook's URL, token and all, stays secret."""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import dagster as dg
import pytest
from dagster._utils.error import serializable_error_info_from_exc_info

from ductwork.contract.encoding import loads
from ductwork.settings import AlertSettings
from pipelines.sensors import AlertNotSent, alert_on_run_failure
from sandbox.local_server import free_socket, serving

TOKEN = "T0KEN-in-the-webhook-path-9f2c"


def webhook_answering(status: int, received: list[dict]) -> Callable:
    """An ASGI webhook that keeps each posted JSON body and answers ``status``."""

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
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return webhook


@dg.op
def explode() -> None:
    raise RuntimeError("the upstream went away")


@dg.job
def doomed() -> None:
    explode()


@contextmanager
def failed_run_context() -> Iterator[dg.RunFailureSensorContext]:
    """The sensor's context for one real failed run on an ephemeral instance."""
    with dg.DagsterInstance.ephemeral() as instance:
        result = doomed.execute_in_process(instance=instance, raise_on_error=False)
        yield dg.build_run_status_sensor_context(
            sensor_name="alert_on_run_failure",
            dagster_instance=instance,
            dagster_run=result.dagster_run,
            dagster_event=result.get_run_failure_event(),
        ).for_run_failure()


def test_a_failed_run_is_posted_to_the_webhook_with_its_job_and_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    received: list[dict] = []
    with serving(webhook_answering(204, received)) as url, failed_run_context() as context:
        monkeypatch.setenv("DUCTWORK_ALERT_WEBHOOK_URL", f"{url}/hook")
        alert_on_run_failure(context)
    assert len(received) == 1
    assert received[0]["job"] == "doomed"
    assert received[0]["run_id"] == context.dagster_run.run_id
    assert "failed" in received[0]["text"]


def _closed_port_url() -> str:
    """A loopback URL nothing listens on."""
    with free_socket() as sock:
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("answer", [204, 500, "unreachable", "malformed"])
def test_the_webhook_url_never_reaches_a_log_an_exception_or_the_tick(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    answer: int | str,
) -> None:
    received: list[dict] = []
    status = answer if isinstance(answer, int) else 204
    raised: BaseException | None = None
    with serving(webhook_answering(status, received)) as live, failed_run_context() as context:
        base = {"unreachable": _closed_port_url(), "malformed": "http://[bad"}.get(answer, live)
        monkeypatch.setenv("DUCTWORK_ALERT_WEBHOOK_URL", f"{base}/services/{TOKEN}")
        capfd.readouterr()
        try:
            with caplog.at_level(logging.DEBUG):
                alert_on_run_failure(context)
        except Exception as exc:  # what the sensor daemon records as the tick's error
            raised = exc
            tick_error = serializable_error_info_from_exc_info(sys.exc_info()).to_string()
        # The sensor's own log goes to Dagster's console handler, not through caplog's.
        sensor_log = capfd.readouterr().err
    assert "of doomed failed" in sensor_log
    texts = [sensor_log, *(record.getMessage() for record in caplog.records)]
    texts += [str(record.args) for record in caplog.records]
    if answer == 204:
        assert raised is None and len(received) == 1
    else:
        assert isinstance(raised, AlertNotSent), raised
        assert str(status if answer == 500 else "could not be reached") in str(raised)
        texts += [tick_error, "".join(traceback.format_exception(raised))]
    texts.append(repr(AlertSettings()))
    for text in texts:
        assert TOKEN not in text, text[:300]
