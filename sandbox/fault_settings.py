"""The sandbox's misbehaviour settings, as set by CLI flags or ``PUT /_sandbox/faults``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

# In roll order: a roll below the first rate is that fault, and so on.
RATES = ("drop_rate", "error_rate", "rate_limit_rate", "truncate_rate", "html_rate")
LEAD_DETAIL_ID_FORMS = ("", "omit_id", "case_safe")
SWITCHES = ("mixed_timestamps", "loop_cursor", "endless_pages", "gzip_bomb", "header_flood")


@dataclass
class Faults:
    """Injected faults, applied to every path but ``/_sandbox/`` and ``/media/``.

    Each request rolls once: below ``drop_rate`` the connection is cut mid-body, in the next
    ``error_rate`` a 500/502/503/504, in the next ``rate_limit_rate`` a 429 with
    ``Retry-After: retry_after_s``, in the next ``truncate_rate`` a 200 whose JSON body is cut
    in half (with a matching Content-Length, so only parsing notices), in the next
    ``html_rate`` a 200 carrying an HTML error page, as a misconfigured proxy sends.
    ``seed`` makes the rolls repeatable. From the request after ``revoke_after`` on (0:
    never), every answer is a 401, as when the key is revoked mid-run.

    Four switches make the upstream hostile rather than flaky: ``loop_cursor`` (the lead list
    ignores its cursor and answers its first page again), ``endless_pages`` (every page-number
    list ignores ``page``, answering its first page for every page, and reports a billion
    pages), ``gzip_bomb`` (every answer is sent gzip-compressed behind a gigabyte of
    compressed whitespace: about a megabyte on the wire, see ``sandbox.gzip_bomb``) and
    ``header_flood`` (every answer carries ``FLOOD_FIELDS`` header fields more).
    """

    error_rate: float = 0.0
    rate_limit_rate: float = 0.0
    retry_after_s: int = 1
    drop_rate: float = 0.0
    truncate_rate: float = 0.0
    html_rate: float = 0.0
    revoke_after: int = 0
    latency_ms: float = 0.0
    seed: int = 0
    mutate_every: int = 0  # apply ``mutation`` every N faultable requests (0: never)
    mutation: dict[str, int] = field(default_factory=dict)
    # Lead and asset lists write some date-times in other ISO 8601 forms (see ``styled_record``).
    mixed_timestamps: bool = False
    # Lead detail answers: "omit_id" leaves out ``id``; "case_safe" lists 15-character lead ids
    # and answers with the 18-character one (see ``sandbox.lead_id_forms``).
    lead_detail_ids: str = ""
    loop_cursor: bool = False
    endless_pages: bool = False
    gzip_bomb: bool = False
    header_flood: bool = False

    def as_json(self) -> dict[str, Any]:
        """The settings as the admin API shows them."""
        return asdict(self)

    def updated(self, changes: dict[str, Any]) -> Faults:
        """A copy with ``changes`` applied; ValueError names what is unknown or out of range."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ValueError(f"unknown fault settings: {', '.join(unknown)}")
        result = replace(self, **changes)
        result.validate()
        return result

    def validate(self) -> None:
        """Raise ValueError unless every setting has a usable type and range."""
        for name in RATES:
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1:
                raise ValueError(f"{name} must be a number between 0 and 1")
        if sum(getattr(self, name) for name in RATES) > 1:
            raise ValueError(f"the sum of {', '.join(RATES)} must not exceed 1")
        for name in ("retry_after_s", "seed", "mutate_every", "revoke_after"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer")
        if not isinstance(self.latency_ms, int | float) or not 0 <= self.latency_ms <= 60_000:
            raise ValueError("latency_ms must be a number between 0 and 60000")
        if not isinstance(self.mutation, dict):
            raise ValueError("mutation must be an object of counts")
        for name in SWITCHES:
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false")
        if self.lead_detail_ids not in LEAD_DETAIL_ID_FORMS:
            raise ValueError("lead_detail_ids must be one of " + ", ".join(LEAD_DETAIL_ID_FORMS))
