"""A sync in a process of its own, for tests that kill it with SIGKILL part way.

``python -m tests.crash_sync HOME UPSTREAM_URL S3_ENDPOINT BUCKET ASSET...`` materialises the
named assets (and the publish) against the given upstream and object store.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import dagster as dg

from pipelines.definitions import SYNCED_AND_PUBLISHED
from tests.conftest import ObjectStoreServer, resources_for


def main(argv: list[str]) -> int:
    """Run the selected assets once; exit status 0 on success."""
    home, upstream_url, endpoint, bucket, *names = argv
    result = dg.materialize(
        SYNCED_AND_PUBLISHED,
        selection=names,
        resources=resources_for(Path(home), upstream_url, ObjectStoreServer(endpoint, bucket)),
        raise_on_error=False,
    )
    return 0 if result.success else 1


def run_quietly(*args: str | list[str]) -> None:
    """``main`` for a forked child: no output, exit status as the process's."""
    home, upstream_url, endpoint, bucket, names = args
    assert isinstance(names, list)
    logging.disable(logging.CRITICAL)
    sys.exit(main([str(home), str(upstream_url), str(endpoint), str(bucket), *names]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
