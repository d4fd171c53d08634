"""The copies published from the warehouse that still hold erased keys (a stub, replaced by
the module that removes them: older snapshot files, record files, change files, ``.past/``
rebuilds and the store's objects)."""

from __future__ import annotations

from ductwork.settings import HomeSettings


def erase_copies(home_settings: HomeSettings, stream: str, keys: list[str]) -> dict[str, int]:
    """Remove every copy of the keys of ``stream`` outside the warehouse and its new snapshot;
    what was removed, counted by kind. This stub removes nothing and is replaced."""
    return {}
