"""The names of the change files every publish writes beside its snapshot, one per stream
(``ductwork.history.change_files``): ``.changes-<version>.<stream>``, first as
``.changes-<random>.partial``. A module of their own, so that whatever finds or removes them
(the publish's pruning, an erasure) names them without importing how they are written."""

from __future__ import annotations

CHANGES_PREFIX = ".changes-"
CHANGES_PARTIAL = ".partial"


def change_file_name(version: str, stream: str) -> str:
    """The name of the change file of ``stream`` written by the publish of ``version``, beside
    its snapshot."""
    return f"{CHANGES_PREFIX}{version}.{stream}"
