"""``ductwork subscriptions``: who is POSTed a signed notification after each publish."""

from __future__ import annotations

import argparse

from pipelines.commands.arguments import STREAM_NAMES, Subcommands, writes_data_folder


def add(sub: Subcommands) -> None:
    """``ductwork subscriptions`` with ``add``, ``list``, ``remove`` and ``replay``."""
    subs = sub.add_parser(
        "subscriptions", help="Who is POSTed a signed notification after each publish."
    )
    subs_sub = subs.add_subparsers(dest="subscriptions_command", required=True)
    add = subs_sub.add_parser(
        "add", help="Subscribe a URL to streams; prints its signing secret as the last line."
    )
    add.add_argument("name")
    add.add_argument("--url", required=True, help="Where notifications are POSTed.")
    add.add_argument(
        "--stream",
        action="append",
        required=True,
        metavar="STREAM",
        help=f"Required, repeatable. Streams: {STREAM_NAMES}.",
    )
    add.set_defaults(run=add_subscription)
    listing = subs_sub.add_parser(
        "list", help="List subscriptions (URL, streams, cursor, active/failing/paused)."
    )
    listing.set_defaults(run=list_subscriptions)
    remove = subs_sub.add_parser("remove", help="Remove a subscription.")
    remove.add_argument("name")
    remove.set_defaults(run=remove_subscription)
    replay = subs_sub.add_parser(
        "replay", help="Deliver again every notification after a token, now (resumes it)."
    )
    replay.add_argument("name")
    replay.add_argument("--since", required=True, metavar="TOKEN", help="A changes-feed token.")
    replay.set_defaults(run=replay_subscription)
    for command in (add, listing, remove, replay):
        writes_data_folder(command)


def add_subscription(options: argparse.Namespace) -> int:
    """Subscribe a URL; prints its signing secret last."""
    from pipelines import subscription_commands

    return subscription_commands.add(options.name, options.url, options.stream)


def list_subscriptions(options: argparse.Namespace) -> int:
    """Print every subscription."""
    from pipelines import subscription_commands

    return subscription_commands.show()


def remove_subscription(options: argparse.Namespace) -> int:
    """Remove a subscription."""
    from pipelines import subscription_commands

    return subscription_commands.remove(options.name)


def replay_subscription(options: argparse.Namespace) -> int:
    """Deliver again every notification after a token."""
    from pipelines import subscription_commands

    return subscription_commands.replay(options.name, options.since)
