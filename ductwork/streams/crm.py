"""The CRM family's stream: ``leads``, a list paged by (CreatedDate, Id) cursor with no
``updatedAfter``, and each new or changed lead's details."""

from __future__ import annotations

from typing import Any

from ductwork.contract import paths
from ductwork.contract.paths import Family
from ductwork.streams.model import EVERY_15_MINUTES, Serving, Step, Stream, Table
from ductwork.sync.cursor_list import CursorList
from ductwork.sync.detail_queue import DetailQueue
from ductwork.upstream.paging import CursorPaging
from ductwork.upstream.schema_drift import NULL, NUMBER, RecordShape
from ductwork.warehouse.columns import Columns
from ductwork.warehouse.loading import Record, text_or_none, timestamp_or_none

LEAD_RECORD = RecordShape(
    required={
        "Id": str, "CreatedDate": str, "LeadID__c": str, "Status": str, "LeadSource": str,
        "Name": str, "Business_Unit__c": str, "StateCode": str, "PostalCode": str,
        "Campaign__c": (str, NULL), "marketing_medium__c": str, "Rooms__c": str,
        "When_Are_You_Planning_to_Purchase__c": str, "RecordTypeId": str,
    },
    # The upstream leaves these out of some leads.
    optional={"marketing_term__c": str, "utm_advertising_campaign__c": str},
    notes={
        "Id": "Lead id.",
        "CreatedDate": "Date-time; the list's order and cursor use it.",
    },
)  # fmt: skip
LEAD_DETAIL_RECORD = RecordShape(
    required={
        "id": str, "email": str, "name": str, "FirstName": str, "LastName": str,
        "company": str, "phone": str, "category": str, "status": str, "purchaseStatus": str,
        "address": dict, "annualRevenue": NUMBER, "assignedContractor": str,
        "assignedBU": str, "doNotSell": bool, "approvalCode": str, "isApprovedHEAR": bool,
        "isQualifiedHEAR": bool, "tierHEAR": str, "Consumer_Rebate_Summary__c": str,
        "Contractor_Rebate_Summary__c": str, "Campaign__c": (str, NULL),
        "Auto_Assign_Contractors__c": bool, "Rooms__c": str,
        "When_Are_You_Planning_to_Purchase__c": str, "RecordTypeId": str,
    },
    notes={"id": "Lead id."},
)  # fmt: skip

# The lead list pages by a (CreatedDate, Id) cursor; createdAfter reads a window again.
LEAD_PAGING = CursorPaging(
    paths.LEADS,
    created_member="CreatedDate",
    id_member="Id",
    created_parameter="cursorCreatedDate",
    id_parameter="cursorId",
    created_after_parameter="createdAfter",
    noun="leads",
    item="lead",
)
LEAD_COLUMNS = Columns(
    ("id", "string"), ("created_at", "timestamp"), ("created_date_text", "string"),
    ("lead_number", "string"), ("status", "string"), ("lead_source", "string"),
    ("name", "string"), ("business_unit", "string"), ("state_code", "string"),
    ("postal_code", "string"), ("campaign", "string"), ("record", "string"),
    ("synced_at", "timestamp")
)  # fmt: skip
DETAIL_COLUMNS = Columns(
    ("id", "string"), ("email", "string"), ("name", "string"),
    ("company", "string"), ("phone", "string"), ("category", "string"),
    ("status", "string"), ("purchase_status", "string"),
    ("assigned_contractor", "string"), ("assigned_bu", "string"),
    ("annual_revenue", "float64"), ("do_not_sell", "bool"), ("found", "bool"),
    ("record", "string"), ("synced_at", "timestamp")
)  # fmt: skip


def lead_row(lead: Record) -> dict[str, Any]:
    """Typed columns of a lead list item."""
    return {
        "id": str(lead["Id"]),
        "created_at": timestamp_or_none(lead.get("CreatedDate")),
        "created_date_text": text_or_none(lead.get("CreatedDate")),
        "lead_number": text_or_none(lead.get("LeadID__c")),
        "status": text_or_none(lead.get("Status")),
        "lead_source": text_or_none(lead.get("LeadSource")),
        "name": text_or_none(lead.get("Name")),
        "business_unit": text_or_none(lead.get("Business_Unit__c")),
        "state_code": text_or_none(lead.get("StateCode")),
        "postal_code": text_or_none(lead.get("PostalCode")),
        "campaign": text_or_none(lead.get("Campaign__c")),
    }


def detail_row(lead_id: str, detail: Record) -> dict[str, Any]:
    """Typed columns of a lead detail, keyed by ``lead_id``, the id it was requested by.

    The answer's own ``id`` may be missing, or name the lead in another form (Salesforce's
    18-character id for a 15-character one): the lead list's id is the key that joins the
    detail to its lead and takes it off the queue.
    """
    revenue = detail.get("annualRevenue")
    do_not_sell = detail.get("doNotSell")
    return {
        "id": lead_id,
        "email": text_or_none(detail.get("email")),
        "name": text_or_none(detail.get("name")),
        "company": text_or_none(detail.get("company")),
        "phone": text_or_none(detail.get("phone")),
        "category": text_or_none(detail.get("category")),
        "status": text_or_none(detail.get("status")),
        "purchase_status": text_or_none(detail.get("purchaseStatus")),
        "assigned_contractor": text_or_none(detail.get("assignedContractor")),
        "assigned_bu": text_or_none(detail.get("assignedBU")),
        "annual_revenue": float(revenue) if isinstance(revenue, int | float) else None,
        "do_not_sell": do_not_sell if isinstance(do_not_sell, bool) else None,
        "found": True,
    }


LEADS = Stream(
    name="leads",
    family=Family.CRM,
    key="Id",
    path=paths.LEADS,
    description="CRM leads: the list items, and each lead's details.",
    cadence=EVERY_15_MINUTES,
    shape=LEAD_DETAIL_RECORD,
    steps=(
        Step(
            asset="crm_leads",
            description=(
                "CRM lead list, cursor-paged by (CreatedDate, Id) from the last committed "
                "cursor; re-reads a rolling window of recent leads for status changes; "
                "mode=reconcile re-reads all. Queues new and changed leads for their details."
            ),
            reader=CursorList("leads", LEAD_PAGING, lead_row, LEAD_COLUMNS, LEAD_RECORD),
            table=Table("leads", ("id",)),
        ),
        Step(
            asset="crm_lead_details",
            description=(
                "Lead details (/crm/v1.1/leads/{id}) for every queued new or changed lead."
            ),
            reader=DetailQueue(
                paths.LEADS, "leads", detail_row, DETAIL_COLUMNS, LEAD_DETAIL_RECORD
            ),
            table=Table("lead_details", ("id",)),
            after=("crm_leads",),
        ),
    ),
    serving=Serving.CURSOR_LIST,
    personal_key="id",
)
