"""The daemon's sensors: run-failure alerts and the retries of change notifications.

Run-failure alerting is always logged, and posted as JSON when a webhook URL is set. A webhook
URL usually carries its token, so it is a secret: it never reaches a log, an exception message
or the sensor's tick history. A failed post is reported by what went wrong (a status, an
error's kind), never by where it was sent.
"""

from __future__ import annotations

import dagster as dg

from assets.notifications import SENSOR_BUDGET_IN_TIMEOUTS, deliver_pending
from ductwork.notifications.delivery import summary
from ductwork.settings import AlertSettings, HomeSettings, RunSettings, load

WEBHOOK_TIMEOUT_S = 10.0
INTERVAL_S = load(RunSettings).sensor_interval_s


class AlertNotSent(RuntimeError):
    """The alert did not reach the webhook; the message never names the URL."""


def failure_message(context: dg.RunFailureSensorContext) -> dict[str, str]:
    """The short JSON an operator's chat or pager receives."""
    run = context.dagster_run
    return {
        "text": f"ductwork run {run.run_id[:8]} of {run.job_name} failed",
        "job": run.job_name,
        "run_id": run.run_id,
        "error": (context.failure_event.message or "")[:500],
    }


def post_alert(url: str, message: dict[str, str], timeout_s: float = WEBHOOK_TIMEOUT_S) -> None:
    """POST ``message`` to the webhook at ``url``; AlertNotSent when it fails."""
    import httpx  # only a failed run with a webhook set needs it

    problem: str | None = None
    try:
        request = httpx.Request(
            "POST", url, json=message, extensions={"timeout": httpx.Timeout(timeout_s).as_dict()}
        )
        # The transport, not a Client: a Client logs every request's URL (logger "httpx").
        with httpx.HTTPTransport() as transport:
            response = transport.handle_request(request)
            response.read()
        if not response.is_success:
            problem = f"the alert webhook answered {response.status_code}"
    except Exception as exc:  # its message or its request may name the URL
        problem = f"the alert webhook could not be reached ({type(exc).__name__})"
    if problem is not None:
        # Raised outside the handler, so no chained exception carries the URL into the tick.
        raise AlertNotSent(problem)


@dg.run_failure_sensor(
    name="alert_on_run_failure",
    description="Logs every failed run and posts it to DUCTWORK_ALERT_WEBHOOK_URL when set.",
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=INTERVAL_S,
    # Without it, Dagster passes over the runs that have no code location of their own: every
    # ``ductwork sync`` and ``run-job`` (the operators' main path) runs its job in the CLI's
    # process. This code location is the only one there is.
    monitor_all_code_locations=True,
)
def alert_on_run_failure(context: dg.RunFailureSensorContext) -> None:
    """Tell someone that a run failed."""
    message = failure_message(context)
    context.log.error(message["text"])
    url = load(AlertSettings).alert_webhook_url
    if url is not None:
        post_alert(url.get_secret_value(), message)


@dg.sensor(
    name="retry_change_notifications",
    description=(
        "Delivers the change notifications a publishing run could not, each subscriber after "
        "its back-off, in order; the tick names subscribers failing or paused."
    ),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=INTERVAL_S,
)
def retry_change_notifications(context: dg.SensorEvaluationContext) -> dg.SkipReason:
    """Deliver what every due subscription has still to be told."""
    try:
        outcomes = deliver_pending(load(HomeSettings), SENSOR_BUDGET_IN_TIMEOUTS)
    except FileNotFoundError:  # nothing published yet
        return dg.SkipReason("no snapshot published yet")
    text = summary(outcomes)
    if any(outcome.delivered or outcome.state != "told" for outcome in outcomes):
        context.log.info(text)
    return dg.SkipReason(text)


SENSORS = [alert_on_run_failure, retry_change_notifications]
