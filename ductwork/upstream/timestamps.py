"""One form for every date-time a stream stores or compares: the wire contract's own.

The upstream may write an instant in any ISO 8601 form it likes (``Z``, ``+00:00``, ``+0000``,
another offset, with or without a fraction). Cursors and bookmarks hold such instants, are sent
back as query parameters and are compared as text, so they keep only the contract's form (UTC,
milliseconds, ``Z``): fixed-width text whose order is the instants' order. Records themselves
are stored as received; only the copies used to resume and compare are normalised.
"""

from __future__ import annotations

from ductwork.contract.encoding import format_datetime, in_contract_form, parse_received_datetime


def canonical(text: str) -> str:
    """``text`` in the contract's form; ValueError when it is not a date-time with an offset."""
    moment = parse_received_datetime(text)
    # Text already in the contract's form is its own rendering: skip formatting it again.
    return text if in_contract_form(text) else format_datetime(moment)


def canonical_or_received(value: object) -> str:
    """``value`` in the contract's form, or as received (as text) when it is no date-time.

    An instant that cannot be read cannot be normalised; it is passed back to the upstream
    unchanged, which is what a cursor did before normalising.
    """
    text = "" if value is None else str(value)
    if in_contract_form(text):
        return text  # its own rendering when it names a real instant, received as is when not
    try:
        return canonical(text)
    except ValueError:
        return text
