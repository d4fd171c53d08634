"""``ductwork forget``: erase a person's records (``ductwork.erasure``), or lift a suppression.

The erasure runs as the ``forget`` job on the data folder's Dagster instance (in this process,
as ``ductwork sync`` runs its jobs; it waits its turn at the warehouse like any run), reading
the keys from the pending request written here. Lifting a suppression runs in this process under
the warehouse's lease. Nothing printed or logged names a key: keyed hashes stand for them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ductwork.erasure import audit
from ductwork.erasure.exports import exports_holding
from ductwork.erasure.forget import Request, lift_suppression, pending_for, write_pending
from ductwork.settings import HomeSettings, UpstreamSettings, load
from ductwork.streams.model import Stream
from ductwork.streams.registry import personal_streams
from pipelines.usage import UsageError


def _say(line: str) -> None:
    print(f"ductwork forget: {line}", file=sys.stderr)


def run_forget(
    stream_name: str,
    keys: list[str],
    reason: str | None,
    *,
    suppress: bool,
    lift: bool,
    verbose: bool = False,
) -> int:
    """Erase (or with ``lift``, lift the suppression of) the keys of a stream with personal
    data; the exit code."""
    stream = next((s for s in personal_streams() if s.name == stream_name), None)
    if stream is None:
        personal = ", ".join(s.name for s in personal_streams())
        raise UsageError(f"forget: {stream_name!r} is not a stream with personal data ({personal})")
    keys = list(dict.fromkeys(keys))
    home = load(HomeSettings)
    if lift:
        if suppress or reason is not None:
            raise UsageError("forget --lift takes no --reason nor --suppress")
        return _lift(home, stream.name, keys)
    if not reason or not reason.strip():
        raise UsageError("forget needs --reason TEXT (kept in the audit log)")
    if not suppress and _refused_as_still_served(home, stream, keys):
        return 1
    earlier, request = pending_for(
        home, Request(stream.name, tuple(keys), reason.strip(), suppress)
    )
    if earlier is not None:
        _say("finishing an earlier erasure that was stopped before it ended")
        code = _run_forget_job(verbose)
        if code != 0:
            return code
    write_pending(home.home, request)
    code = _run_forget_job(verbose)
    if code != 0:
        _say("the erasure did not finish: run the same command again to finish it")
        return code
    _report_erasure(home, stream.name, keys, request, suppress)
    return 0


def _lift(home: HomeSettings, stream: str, keys: list[str]) -> int:
    """Lift the suppression of ``keys``, saying which were suppressed (by key hash)."""
    lifted = lift_suppression(home, stream, keys, _say)
    hashes = audit.keyed_hashes(home.home, keys)
    print(f"lifted {len(lifted)} of {len(keys)} suppression(s) in {stream}: the next "
          "sync brings the records back")  # fmt: skip
    for key, hashed in zip(keys, hashes, strict=True):
        state = "lifted" if key in lifted else "was not suppressed"
        print(f"  {hashed[:16]}  {state}")
    return 0


def _refused_as_still_served(home: HomeSettings, stream: Stream, keys: list[str]) -> bool:
    """Whether the upstream still serves some of ``keys`` (then said on stderr, by key hash):
    the next sync would bring them back."""
    # Imported here: the upstream client is needed only for this question.
    from ductwork.erasure.upstream_check import still_served

    served = still_served(stream, keys, load(UpstreamSettings))
    if not served:
        return False
    hashes = audit.keyed_hashes(home.home, served)
    print(
        f"ductwork forget: the upstream still serves {len(served)} of these "
        f"{stream.name} record(s) (key hashes {', '.join(h[:16] for h in hashes)}): "
        "refused, the next sync would bring them back; delete them upstream first, or "
        "give --suppress to erase them and keep them out of every later sync",
        file=sys.stderr,
    )
    return True


def _report_erasure(
    home: HomeSettings, stream: str, keys: list[str], request: Request, suppress: bool
) -> None:
    """What the erasure removed (from its audit line), and the exports that still hold any of
    the records."""
    line = _audit_line(home.home, request.erasure_id)
    removed = line.get("rows_removed", {})
    print(
        f"erased {len(keys)} {stream} record(s): {sum(removed.values())} row(s) removed; "
        f"audit log: {audit.audit_path(home.home)} (erasure {request.erasure_id})"
    )
    for table, count in sorted(removed.items()):
        if count:
            print(f"  {table}: {count}")
    for kind, count in sorted(line.get("copies_removed", {}).items()):
        print(f"  {kind}: {count}")
    if suppress:
        print(f"suppressed: later syncs skip these records until `ductwork forget --lift "
              f"{stream} KEY`")  # fmt: skip
    held = exports_holding(home, stream, keys)
    if held:
        print(
            f"{len(held)} export(s) written by `ductwork export` still hold some of these "
            "records; the mirror cannot erase copies outside it: remove or rewrite them"
        )
        for folder in held:
            print(f"  {folder}")


def _run_forget_job(verbose: bool) -> int:
    """Run the ``forget`` job (it reads the pending request) on the data folder's instance."""
    from assets.erasure import FORGET_JOB
    from pipelines.sync_command import run_job

    return run_job(FORGET_JOB, None, publish=False, verbose=verbose).exit_code


def _audit_line(home: Path, erasure_id: str) -> dict:
    """The audit log's line of an erasure (empty when missing)."""
    for line in reversed(audit.entries(home)):
        if line.get("erasure") == erasure_id:
            return line
    return {}
