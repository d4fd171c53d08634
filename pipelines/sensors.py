"""Run-failure alerting: always logged; posted as JSON when a webhook URL is set."""

from __future__ import annotations

import dagster as dg
import httpx

from ductwork.settings import AlertSettings, load


def failure_message(context: dg.RunFailureSensorContext) -> dict[str, str]:
    """The short JSON an operator's chat or pager receives."""
    run = context.dagster_run
    return {
        "text": f"ductwork run {run.run_id[:8]} of {run.job_name} failed",
        "job": run.job_name,
        "run_id": run.run_id,
        "error": (context.failure_event.message or "")[:500],
    }


@dg.run_failure_sensor(
    name="alert_on_run_failure",
    description="Logs every failed run and posts it to DUCTWORK_ALERT_WEBHOOK_URL when set.",
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def alert_on_run_failure(context: dg.RunFailureSensorContext) -> None:
    """Tell someone that a run failed."""
    message = failure_message(context)
    context.log.error(message["text"])
    url = load(AlertSettings).alert_webhook_url
    if url:
        httpx.post(url, json=message, timeout=10).raise_for_status()


SENSORS = [alert_on_run_failure]
