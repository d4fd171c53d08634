"""Immutable DuckDB snapshots of the warehouse, the atomic pointer to the current one, and the
copies of them in the object store.

The package's modules, each with one concern:

- ``folder``: snapshot file names, the ``CURRENT`` pointer, opening the current snapshot, the
  publish lock;
- ``publishing``: a publish (or a confirmation) of the warehouse, and adopting a snapshot
  published elsewhere;
- ``fingerprint``: the content fingerprints that tell whether a publish has anything new;
- ``stamp``: the warehouse file as a publish left it, so the next one can skip the fingerprint;
- ``guard``: the checks a reader makes before it trusts a snapshot (checksum, definitions, locked
  settings);
- ``leases`` and ``pruning``: which snapshots readers still hold, and removing the others with
  the files beside them;
- ``record_files``: the names of the read API's record files beside a snapshot;
- ``store``: the snapshots shared through the object store between replicas;
- ``sync_times``: when each stream was last synced, carried with the snapshots.

What most callers need is named here: ``snapshots.current``, ``snapshots.publish``, ...
"""

from ductwork.snapshots.fingerprint import (
    content_fingerprint,
    stamped_as_current,
    unchanged_tables,
)
from ductwork.snapshots.folder import (
    POINTER,
    PREFIX,
    STAGING_PREFIX,
    SUFFIX,
    Snapshot,
    confirm,
    confirmed_at,
    current,
    new_version,
    open_current,
    version_of,
)
from ductwork.snapshots.leases import Lease, in_use
from ductwork.snapshots.pruning import prune
from ductwork.snapshots.publishing import Publication, adopt, publish

__all__ = [
    "POINTER",
    "PREFIX",
    "STAGING_PREFIX",
    "SUFFIX",
    "Lease",
    "Publication",
    "Snapshot",
    "adopt",
    "confirm",
    "confirmed_at",
    "content_fingerprint",
    "current",
    "in_use",
    "new_version",
    "open_current",
    "prune",
    "publish",
    "stamped_as_current",
    "unchanged_tables",
    "version_of",
]
