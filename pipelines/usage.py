"""Errors in how a command was called, reported in one line with exit code 2."""

from __future__ import annotations


class UsageError(ValueError):
    """The command line names something that does not exist or cannot be combined."""
