"""Settings from the environment (prefix ``DUCTWORK_``), grouped by the part that needs them.

Each group is loaded where it is used, so a command only asks for what it needs, and a missing
required setting is reported in one line that names the variable. The groups live in
``groups`` and ``serve``, what they share in ``base``; ``ALL_GROUPS`` lists them in the order
the documentation's settings page shows them.
"""

from __future__ import annotations

from pydantic_settings import BaseSettings

from ductwork.settings.base import PREFIX, SettingsError, load, upstream_environment
from ductwork.settings.groups import (
    AlertSettings,
    AnalystSettings,
    FileSettings,
    HistorySettings,
    HomeSettings,
    ImageSettings,
    NotificationSettings,
    RunSettings,
    S3Settings,
    SnapshotStoreSettings,
    SyncSettings,
    UpstreamSettings,
    UpstreamTuning,
)
from ductwork.settings.serve import ServeSettings

__all__ = [
    "ALL_GROUPS", "PREFIX", "AlertSettings", "AnalystSettings", "FileSettings",
    "HistorySettings", "HomeSettings", "ImageSettings", "NotificationSettings", "RunSettings",
    "S3Settings", "ServeSettings", "SettingsError", "SnapshotStoreSettings", "SyncSettings",
    "UpstreamSettings", "UpstreamTuning", "load", "upstream_environment",
]  # fmt: skip

ALL_GROUPS: tuple[type[BaseSettings], ...] = (
    HomeSettings,
    UpstreamSettings,
    UpstreamTuning,
    SyncSettings,
    HistorySettings,
    RunSettings,
    AlertSettings,
    FileSettings,
    AnalystSettings,
    S3Settings,
    ImageSettings,
    SnapshotStoreSettings,
    ServeSettings,
)
