"""The registry: every stream the mirror keeps, declared once, in the order the
service spec lists them. Assets, jobs, schedules, freshness, checks, CLI options, serving and
the data dictionary all derive from ``STREAMS``.

To add a stream, see docs/adding-a-stream.md.
"""

from __future__ import annotations

from ductwork.streams.crm import LEADS
from ductwork.streams.data_warehouse import DIGITAL_ASSETS, SUBMITTALS
from ductwork.streams.internal import CONTRACTORS, INDOOR_MODELS, MANUALS
from ductwork.streams.model import CADENCES, Cadence, Serving, Step, Stream
from ductwork.streams.products import PAIRINGS, PRODUCTS

STREAMS: tuple[Stream, ...] = (
    PRODUCTS,
    PAIRINGS,
    DIGITAL_ASSETS,
    SUBMITTALS,
    LEADS,
    CONTRACTORS,
    INDOOR_MODELS,
    MANUALS,
)
# The spec paths served without a key (the spec declares no Authorization on them).
OPEN_PATHS = frozenset(stream.path for stream in STREAMS if stream.open_access)

__all__ = [
    "CADENCES", "CONTRACTORS", "DIGITAL_ASSETS", "INDOOR_MODELS", "LEADS", "MANUALS",
    "OPEN_PATHS", "PAIRINGS", "PRODUCTS", "STREAMS", "SUBMITTALS", "Cadence", "Serving", "Step",
    "Stream",
]  # fmt: skip


def stream_named(name: str) -> Stream:
    """The stream of that name; KeyError naming the known ones otherwise."""
    for stream in STREAMS:
        if stream.name == name:
            return stream
    raise KeyError(f"unknown stream {name!r}; streams: {', '.join(s.name for s in STREAMS)}")


def stream_of_asset(asset: str) -> Stream | None:
    """The stream one of whose steps is the asset ``asset``, if any."""
    for stream in STREAMS:
        if asset in stream.assets:
            return stream
    return None


def stream_serving(path: str) -> Stream | None:
    """The stream a spec path draws on: the one whose own path is the path or a folder of it,
    else the one that ``serves_below`` a prefix of it; None for a path of no stream."""
    candidates = _BY_FAMILY_FOLDER.get(_family_folder(path))
    if candidates is None:
        return None
    own_paths, served_below = candidates
    for own, folder, stream in own_paths:
        if path == own or path.startswith(folder):
            return stream
    for below, stream in served_below:
        if path.startswith(below):
            return stream
    return None


def _family_folder(path: str) -> str:
    """The path's first two segments with the slash after them (``/products/v2.0/``); empty
    for a path with fewer."""
    end = path.find("/", path.find("/", 1) + 1)
    return path[: end + 1] if end > 0 else ""


_Candidates = tuple[list[tuple[str, str, Stream]], list[tuple[str, Stream]]]


def _index_by_family_folder() -> dict[str, _Candidates]:
    """What ``stream_serving`` compares, made once (it runs for every request of the read API)
    and grouped by the two segments every stream's paths begin with, so that a path is
    compared only with the streams of its own family, in registry order."""
    index: dict[str, _Candidates] = {}
    for stream in STREAMS:
        own_paths, _ = index.setdefault(_checked_folder(stream.path), ([], []))
        own_paths.append((stream.path, stream.path + "/", stream))
    for stream in STREAMS:
        if stream.serves_below is not None:
            _, served_below = index.setdefault(_checked_folder(stream.serves_below), ([], []))
            served_below.append((stream.serves_below, stream))
    return index


def _checked_folder(path: str) -> str:
    folder = _family_folder(path)
    if not folder:
        raise ValueError(f"a stream's path must begin with two segments and a slash: {path!r}")
    return folder


_BY_FAMILY_FOLDER = _index_by_family_folder()


def all_steps() -> list[Step]:
    """Every step of every stream, in registry order."""
    return [step for stream in STREAMS for step in stream.steps]


def streams_of(cadence: Cadence) -> list[Stream]:
    """The streams synced at ``cadence``."""
    return [stream for stream in STREAMS if stream.cadence == cadence]


def served_as(serving: Serving) -> list[Stream]:
    """The streams the read API answers in the way ``serving`` names."""
    return [stream for stream in STREAMS if stream.serving == serving]


def numbered_lists() -> dict[str, str]:
    """Every large list's numbered table, with the base table its positions point into."""
    return dict(found for stream in STREAMS if (found := stream.numbered_list) is not None)


def personal_streams() -> list[Stream]:
    """The streams whose records hold personal data, which ``ductwork forget`` erases."""
    return [stream for stream in STREAMS if stream.personal]
