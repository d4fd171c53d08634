"""Validators of answers.

ETags come from content: an answer's ETag is a hash of its body, so an unchanged record, page
or list keeps its ETag across snapshots, and ``If-None-Match`` answers 304 at any later one.

The hash is XXH3's 128 bits (about 20 µs per MiB here, so a page of 1000 records costs less
to hash than to read); it tells bodies apart, it is not meant to resist a forger, and nothing
trusts it beyond revalidation. The answer sent gzip-compressed is another representation of
the same body: its ETag carries ``GZIP_SUFFIX`` inside the quotes (``serve.gzip_cache`` adds
it), and either form names the body in ``If-None-Match``.

A single-record answer also carries ``Last-Modified`` (``serve.record_times``), against which
``If-Modified-Since`` is compared when no ``If-None-Match`` is sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from email.utils import parsedate_to_datetime

import xxhash

GZIP_SUFFIX = b"-gzip"


def content_etag(body: bytes) -> bytes:
    """The strong ETag of ``body`` as sent uncompressed, quotes included."""
    return b'"' + xxhash.xxh3_128_hexdigest(body).encode() + b'"'


def pieces_etag(pieces: Iterable[bytes | memoryview]) -> bytes:
    """``content_etag`` of the body made of ``pieces`` one after another, not joined."""
    digest = xxhash.xxh3_128()
    for piece in pieces:
        digest.update(piece)
    return b'"' + digest.hexdigest().encode() + b'"'


def with_gzip(etag: bytes) -> bytes:
    """The ETag of the same body sent gzip-compressed."""
    if not etag.endswith(b'"') or etag.endswith(GZIP_SUFFIX + b'"'):
        return etag
    return etag[:-1] + GZIP_SUFFIX + b'"'


def names_body(if_none_match: str | None, etag: bytes) -> bool:
    """Whether an ``If-None-Match`` value names the body whose ETag is ``etag``: ``*``, or one
    of its entity tags, compared weakly (RFC 9110, 13.1.2) and in either content coding."""
    if not if_none_match:
        return False
    wanted = etag.decode("latin-1").strip('"')
    for tag in if_none_match.split(","):
        tag = tag.strip()
        if tag == "*":
            return True
        if tag.startswith("W/"):
            tag = tag[2:]
        tag = tag.strip('"')
        tag = tag.removesuffix(GZIP_SUFFIX.decode())
        if tag == wanted:
            return True
    return False


def unmodified_since(modified: float, if_modified_since: str | None) -> bool:
    """Whether content last modified at ``modified`` (epoch seconds) is no newer than an
    ``If-Modified-Since`` date; a missing or unparseable date is ignored (RFC 9110, 13.1.3)."""
    if not if_modified_since:
        return False
    try:
        since = parsedate_to_datetime(if_modified_since)
    except (TypeError, ValueError, IndexError):
        return False
    if since.tzinfo is None:  # an HTTP date is GMT; a date without a zone is not one
        return False
    return int(modified) <= since.timestamp()
