"""``ductwork keys``: issue, list and revoke the read API's keys."""

from __future__ import annotations

import argparse
import sys

from ductwork.keys import ALL_SCOPES, GRANTABLE_SCOPES, STREAM_SCOPE_PREFIX, KeyFile
from ductwork.settings import HomeSettings, load
from pipelines.commands.arguments import Subcommands

# What ``--scope`` takes, as the help and the error for a missing one show it.
SCOPE_CHOICES = "|".join([*GRANTABLE_SCOPES, ALL_SCOPES, f"{STREAM_SCOPE_PREFIX}STREAM"])


def add(sub: Subcommands) -> None:
    """``ductwork keys`` with ``create``, ``list`` and ``revoke``."""
    keys = sub.add_parser("keys", help="Manage the read API's keys.")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="Issue a key; prints it as the last line.")
    create.add_argument("name")
    create.add_argument(
        "--scope",
        action="append",
        metavar=SCOPE_CHOICES,
        help="Required, repeatable; all: the four data scopes (ops only when named); "
        f"{STREAM_SCOPE_PREFIX}STREAM: one stream of the registry alone.",
    )
    create.set_defaults(run=create_key)
    keys_sub.add_parser("list", help="List keys (names, scopes, state).").set_defaults(
        run=list_keys
    )
    revoke = keys_sub.add_parser("revoke", help="Revoke every key of that name.")
    revoke.add_argument("name")
    revoke.set_defaults(run=revoke_keys)


def _key_file() -> KeyFile:
    return KeyFile(load(HomeSettings).keys_path)


def create_key(options: argparse.Namespace) -> int:
    """Issue a key and print it, last; 2 without a scope or with an unknown one."""
    if not options.scope:
        print(f"ductwork: keys create needs at least one --scope {SCOPE_CHOICES}", file=sys.stderr)
        return 2
    try:
        key = _key_file().create(options.name, options.scope)
    except ValueError as exc:  # an unknown scope: refused before the key file is touched
        print(f"ductwork: keys create: {exc}", file=sys.stderr)
        return 2
    print(f"Created key {options.name!r}; it is shown once and stored only as a hash:")
    print(key)
    return 0


def list_keys(options: argparse.Namespace) -> int:
    """Print every key's name, scopes, creation time and state."""
    for entry in _key_file().entries():
        state = "active" if entry.active else f"revoked {entry.revoked_at}"
        print(f"{entry.name}\t{','.join(entry.scopes)}\t{entry.created_at}\t{state}")
    return 0


def revoke_keys(options: argparse.Namespace) -> int:
    """Revoke every key of the name; 1 when there was none."""
    revoked = _key_file().revoke(options.name)
    print(f"revoked {revoked} key(s) named {options.name!r}")
    return 0 if revoked else 1
