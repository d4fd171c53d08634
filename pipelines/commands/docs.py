"""``ductwork docs``: the data dictionary from the current snapshot, or the settings page."""

from __future__ import annotations

import argparse
from pathlib import Path

from ductwork.settings import HomeSettings, load
from pipelines.commands.arguments import Subcommands, add_force_option


def add(sub: Subcommands) -> None:
    """``ductwork docs``."""
    docs = sub.add_parser(
        "docs", help="Write the data dictionary from the current snapshot, or the settings page."
    )
    docs.add_argument(
        "--page",
        choices=["dictionary", "settings"],
        default="dictionary",
        help="dictionary (from the current snapshot's tables and views) or settings (from the "
        "settings model)",
    )
    docs.add_argument(
        "--out",
        type=Path,
        default=None,
        help="default: docs/data-dictionary.md or docs/settings.md",
    )
    add_force_option(docs)
    docs.set_defaults(run=run)


def run(options: argparse.Namespace) -> int:
    """Write the page asked for."""
    if options.page == "settings":
        from pipelines.settings_page import PAGE, write_settings_page

        return write_settings_page(options.out or PAGE, force=options.force)
    from pipelines.data_dictionary import PAGE, write_dictionary

    out = options.out or PAGE
    return write_dictionary(load(HomeSettings).snapshots_dir, out, force=options.force)
