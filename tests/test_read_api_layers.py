"""The read API's middleware sits outside the framework's own layers.

``serve/app.py`` builds its stack through Starlette's ``build_middleware_stack`` and
``user_middleware``, internals that pyproject.toml pins FastAPI and Starlette for. This test
fails when a release changes what the override relies on, so the pin is widened only with it
passing.
"""

from __future__ import annotations

from pathlib import Path

from starlette.middleware.errors import ServerErrorMiddleware

from ductwork.settings import HomeSettings, ServeSettings
from serve.app import CompressWhenAsked, create_app
from serve.fast_answers import FastAnswers, FastAnswersInFront
from serve.observability import RequestTelemetry


def layers(app: object) -> list[type]:
    """The middleware classes from the outside in, following each layer's ``app``."""
    found = []
    while app is not None and len(found) < 20:
        found.append(type(app))
        app = getattr(app, "app", None)
    return found


def test_our_layers_wrap_the_frameworks_with_the_short_path_in_front(tmp_path: Path) -> None:
    app = create_app(HomeSettings(home=tmp_path), ServeSettings())
    stack = layers(app.build_middleware_stack())
    assert stack[:2] == [FastAnswersInFront, RequestTelemetry]
    ours = [stack.index(cls) for cls in (RequestTelemetry, CompressWhenAsked, FastAnswers)]
    assert ours == sorted(ours)
    assert stack.index(FastAnswers) < stack.index(ServerErrorMiddleware)
    # The app's own list is left as configured, for the next build.
    assert [m.cls for m in app.user_middleware][-1] is FastAnswers
