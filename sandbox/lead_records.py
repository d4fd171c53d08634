"""Sales leads: list items and details, each regenerable from (seed, number) alone.

Only the list items are kept (as JSON bytes, for paging); a detail is rebuilt from its
lead's number when asked for, which the id carries in its last eleven characters. The first
leads come from three bulk imports, thousands of them sharing one ``CreatedDate``.
"""

from __future__ import annotations

import random
from typing import Any

from sandbox.draws import Draws, base62, from_base62
from sandbox.timeline import SPAN_MS, stamp

Record = dict[str, Any]

ID_PREFIX = "00Q"
NUMBER_WIDTH = 11
ID_LENGTH = len(ID_PREFIX) + 4 + NUMBER_WIDTH  # 18, like a Salesforce id
BULK_IMPORTS = 3

LEAD_STATUSES = ("New", "Working", "Qualified", "Nurturing", "Converted", "Closed - Lost")
PURCHASE_STATUSES = ("Researching", "Quoted", "Purchased", "Not Purchased")
LEAD_SOURCES = ("Web", "Dealer Locator", "Phone", "Trade Show", "Partner")
STATES = ("CA", "TX", "NY", "FL", "WA", "MA", "GA", "IL", "CO", "AZ")
BUSINESS_UNITS = ("Residential", "Commercial", "Light Commercial")
FIRST_NAMES = ("Ana", "Bo", "Chen", "Dée", "Eli", "Françoise", "Gus", "Hà", "Ines", "Jürgen")
LAST_NAMES = ("Ng", "Ruiz", "Kå", "O'Neil", "Smith", "Zhōu", "Łukasz", "van Dijk")
CAMPAIGNS = ("Spring25", "HEAR-Rebate", "Winter", None)
MEDIA = ("cpc", "email", "organic", "referral")
PURCHASE_WINDOWS = ("0-3 months", "3-6 months", "6-12 months", "Not sure")


class LeadMaker:
    """Builds lead ``number`` of a seed: the list item and the detail, consistent."""

    def __init__(self, seed: int, count: int) -> None:
        rng = random.Random(f"leads:{seed}")
        self.seed = seed
        self.count = count
        self.per_bulk = max(2_100, count // 30)
        self.bulk_dates = [stamp(rng.randrange(SPAN_MS)) for _ in range(BULK_IMPORTS)]

    def lead_id(self, number: int, draws: Draws) -> str:
        """A mixed-case id whose tail encodes ``number`` (byte order is not letter order)."""
        return ID_PREFIX + draws.text(4) + base62(number, NUMBER_WIDTH)

    def number_of(self, lead_id: str) -> int | None:
        """The lead number an id carries, or None for an id this maker never gives."""
        if len(lead_id) != ID_LENGTH or not lead_id.startswith(ID_PREFIX):
            return None
        return from_base62(lead_id[ID_LENGTH - NUMBER_WIDTH :])

    def make(
        self, number: int, created: str | None = None, with_detail: bool = True
    ) -> tuple[Record, Record | None]:
        """Lead ``number``: (list item, detail); ``created`` overrides the generated date.

        The detail's draws come last, so leaving it out does not change the item.
        """
        d = Draws.keyed(self.seed, "lead", number)
        ident = self.lead_id(number, d)
        if created is None:
            bulk = number // self.per_bulk
            created = self.bulk_dates[bulk] if bulk < BULK_IMPORTS else stamp(d.below(SPAN_MS))
        first, last = d.pick(FIRST_NAMES), d.pick(LAST_NAMES)
        status, state = d.pick(LEAD_STATUSES), d.pick(STATES)
        postal = f"{d.between(1000, 99999):05d}"
        campaign = d.pick(CAMPAIGNS)
        unit = d.pick(BUSINESS_UNITS)
        rooms, when = str(d.between(1, 8)), d.pick(PURCHASE_WINDOWS)
        item: Record = {
            "Id": ident,
            "CreatedDate": created,
            "LeadID__c": f"L-{d.below(10**8):08d}",
            "Status": status,
            "LeadSource": d.pick(LEAD_SOURCES),
            "Name": f"{first} {last}",
            "Business_Unit__c": unit,
            "StateCode": state,
            "PostalCode": postal,
            "Campaign__c": campaign,
            "marketing_term__c": "heat pump",
            "marketing_medium__c": d.pick(MEDIA),
            "utm_advertising_campaign__c": "brand",
            "Rooms__c": rooms,
            "When_Are_You_Planning_to_Purchase__c": when,
            "RecordTypeId": "012000000000001AAA",
        }
        if d.percent(3):  # optional members the upstream leaves out now and then
            del item["marketing_term__c"], item["utm_advertising_campaign__c"]
        if d.percent(3):  # a member the contract does not list
            item["x-score"] = d.below(100)
        if not with_detail:
            return item, None
        return item, _detail(d, item, first, last)


def _detail(d: Draws, item: Record, first: str, last: str) -> Record:
    """A lead's detail, drawn after its list item ``item``, whose members it repeats."""
    return {
        "id": item["Id"],
        "email": f"{first.lower()}.{item['Id'][-6:].lower()}@mail.example",
        "name": item["Name"],
        "FirstName": first,
        "LastName": last,
        "company": d.pick(("", "Acme HVAC", "Home", "Ölwerk GmbH")),
        "phone": f"+1555{d.below(10**7):07d}",
        "category": d.pick(("Residential", "Commercial")),
        "status": item["Status"],
        "purchaseStatus": d.pick(PURCHASE_STATUSES),
        "address": {
            "street": f"{d.between(1, 9999)} Main St",
            "city": "Springfield",
            "state": item["StateCode"],
            "postalCode": item["PostalCode"],
            "country": "US",
        },
        "annualRevenue": d.pick((0, 125000.5, 2_000_000, 87_250)),
        "assignedContractor": f"C-{d.below(300):04d}",
        "assignedBU": item["Business_Unit__c"],
        "doNotSell": d.percent(10),
        "approvalCode": f"A{d.below(10**5):05d}",
        "isApprovedHEAR": d.percent(30),
        "isQualifiedHEAR": d.percent(50),
        "tierHEAR": d.pick(("1", "2", "3")),
        "Consumer_Rebate_Summary__c": "",
        "Contractor_Rebate_Summary__c": "",
        "Campaign__c": item["Campaign__c"],
        "Auto_Assign_Contractors__c": d.percent(50),
        "Rooms__c": item["Rooms__c"],
        "When_Are_You_Planning_to_Purchase__c": item["When_Are_You_Planning_to_Purchase__c"],
        "RecordTypeId": item["RecordTypeId"],
    }
