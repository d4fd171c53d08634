"""The subcommands of ``ductwork``, each in a module of its own that declares its arguments
and runs it: ``add(sub)`` adds the subcommand's parser, whose ``run`` default is the function
that runs it. A module imports at its top only what declaring the arguments needs; what a
command runs is imported when it runs, so ``ductwork --help`` loads no Dagster."""

from __future__ import annotations

import argparse

from pipelines.commands import (
    changes,
    demo,
    dev,
    diff,
    docs,
    export,
    forget,
    keys,
    report,
    run_job,
    sandbox_upstream,
    serve_api,
    sql,
    subscriptions,
    sync,
)

# In the order ``ductwork --help`` lists them.
COMMANDS = (
    sandbox_upstream,
    sync,
    run_job,
    serve_api,
    keys,
    subscriptions,
    sql,
    changes,
    forget,
    diff,
    docs,
    export,
    report,
    demo,
    dev,
)


def parser(version: str) -> argparse.ArgumentParser:
    """The parser of ``ductwork``'s arguments; each subcommand's ``run`` default runs it."""
    made = argparse.ArgumentParser(
        prog="ductwork", description="Mirror the HVAC service into DuckDB and serve it again."
    )
    made.add_argument("--version", action="version", version=f"ductwork {version}")
    sub = made.add_subparsers(dest="command")
    for command in COMMANDS:
        command.add(sub)
    return made
