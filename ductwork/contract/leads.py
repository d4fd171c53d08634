"""Lead list members and the ``fields`` projection rule."""

from __future__ import annotations

from ductwork.contract.errors import invalid

LEAD_LIST_FIELDS: tuple[str, ...] = (
    "Id", "CreatedDate", "LeadID__c", "Status", "LeadSource", "Name", "Business_Unit__c",
    "StateCode", "PostalCode", "Campaign__c", "marketing_term__c", "marketing_medium__c",
    "utm_advertising_campaign__c", "Rooms__c", "When_Are_You_Planning_to_Purchase__c",
    "RecordTypeId",
)  # fmt: skip
ALWAYS_RETURNED: frozenset[str] = frozenset({"Id", "CreatedDate"})


def read_fields(raw: str | None) -> frozenset[str] | None:
    """The members a ``fields`` parameter keeps (Id and CreatedDate always), or None for all."""
    if raw is None or raw.strip() == "":
        return None
    names = [name.strip() for name in raw.split(",") if name.strip()]
    unknown = [name for name in names if name not in LEAD_LIST_FIELDS]
    if unknown:
        raise invalid("fields", f"unknown lead field(s): {', '.join(unknown)}")
    return frozenset(names) | ALWAYS_RETURNED
