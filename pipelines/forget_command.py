"""``ductwork forget``: erase a person's records (``ductwork.erasure``), or lift a suppression.

It runs in this process under the warehouse's lease (a sync running meanwhile is waited for).
Nothing it prints or logs names a key: the keys' keyed hashes stand for them.
"""

from __future__ import annotations

import sys

from ductwork.erasure import audit
from ductwork.erasure.forget import Request, forget, lift_suppression
from ductwork.settings import HomeSettings, UpstreamSettings, load
from ductwork.streams.registry import STREAMS
from pipelines.usage import UsageError


def _say(line: str) -> None:
    print(f"ductwork forget: {line}", file=sys.stderr)


def run_forget(
    stream_name: str, keys: list[str], reason: str | None, *, suppress: bool, lift: bool
) -> int:
    """Erase (or with ``lift``, lift the suppression of) the keys of a stream with personal
    data; the exit code."""
    stream = next((s for s in STREAMS if s.name == stream_name), None)
    if stream is None or not stream.personal:
        personal = ", ".join(s.name for s in STREAMS if s.personal)
        raise UsageError(f"forget: {stream_name!r} is not a stream with personal data ({personal})")
    keys = list(dict.fromkeys(keys))
    home = load(HomeSettings)
    if lift:
        if suppress or reason is not None:
            raise UsageError("forget --lift takes no --reason nor --suppress")
        lifted = lift_suppression(home, stream.name, keys, _say)
        hashes = audit.keyed_hashes(home.home, keys)
        print(f"lifted {len(lifted)} of {len(keys)} suppression(s) in {stream.name}: the next "
              "sync brings the records back")  # fmt: skip
        for key, hashed in zip(keys, hashes, strict=True):
            state = "lifted" if key in lifted else "was not suppressed"
            print(f"  {hashed[:16]}  {state}")
        return 0
    if not reason or not reason.strip():
        raise UsageError("forget needs --reason TEXT (kept in the audit log)")
    if not suppress:
        # Imported here: the upstream client is needed only for this question.
        from ductwork.erasure.upstream_check import still_served

        served = still_served(stream, keys, load(UpstreamSettings))
        if served:
            hashes = audit.keyed_hashes(home.home, served)
            print(
                f"ductwork forget: the upstream still serves {len(served)} of these "
                f"{stream.name} record(s) (key hashes {', '.join(h[:16] for h in hashes)}): "
                "refused, the next sync would bring them back; delete them upstream first, or "
                "give --suppress to erase them and keep them out of every later sync",
                file=sys.stderr,
            )
            return 1
    outcome = forget(home, Request(stream.name, tuple(keys), reason.strip(), suppress), _say)
    rows = sum(outcome.removed.values())
    print(
        f"erased {len(keys)} {stream.name} record(s): {rows} row(s) removed; published "
        f"snapshot {outcome.version}; audit log: {audit.audit_path(home.home)} "
        f"(erasure {outcome.erasure_id})"
    )
    for table, count in sorted(outcome.removed.items()):
        if count:
            print(f"  {table}: {count}")
    for kind, count in sorted(outcome.copies.items()):
        print(f"  {kind}: {count}")
    if suppress:
        print(f"suppressed: later syncs skip these records until `ductwork forget --lift "
              f"{stream.name} KEY`")  # fmt: skip
    return 0
