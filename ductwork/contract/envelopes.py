"""Success envelopes of each family, assembled from pre-serialised record JSON.

Records are joined as bytes, never parsed and re-serialised per request: a page costs one join
of its records and one of the envelope around them (each ``+`` would copy the whole body).
"""

from __future__ import annotations

from collections.abc import Sequence

from ductwork.contract.encoding import dumps


def _joined(records: Sequence[bytes]) -> bytes:
    """The records joined by commas: a list already joined (one element) as it is."""
    return records[0] if len(records) == 1 else b",".join(records)


def product_list(records: Sequence[bytes], pagination: dict[str, int]) -> bytes:
    """``{"success", "data": [...], "pagination", "errors"}`` of a product list."""
    return b"".join(
        (
            b'{"success":true,"data":[',
            _joined(records),
            b'],"pagination":',
            dumps(pagination),
            b',"errors":[]}',
        )
    )


def product_lookup(record: bytes) -> bytes:
    """``{"success", "data": {...}, "errors"}``: one record of the product family, or of a
    data warehouse lookup."""
    return b"".join((b'{"success":true,"data":', record, b',"errors":[]}'))


def nested_list(member: str, records: Sequence[bytes], pagination: dict[str, int]) -> bytes:
    """APIResponseV3 list: the records in ``data``'s ``member``, the pagination beside them."""
    return b"".join(
        (
            b'{"success":true,"data":{',
            dumps(member),
            b":[",
            _joined(records),
            b'],"pagination":',
            dumps(pagination),
            b'},"errors":[]}',
        )
    )


def data_warehouse_list(
    records: Sequence[bytes], pagination: dict[str, int], filters: dict[str, str | None]
) -> bytes:
    """``{"success", "data", "errors", "pagination", "filters"}`` of the digital-asset list."""
    return b"".join(
        (
            b'{"success":true,"data":[',
            _joined(records),
            b'],"errors":[],"pagination":',
            dumps(pagination),
            b',"filters":',
            dumps(filters),
            b"}",
        )
    )


def data_list(records: Sequence[bytes]) -> bytes:
    """``{"success", "data": [...], "errors"}`` of the lead list."""
    return b"".join((b'{"success":true,"data":[', _joined(records), b'],"errors":[]}'))
