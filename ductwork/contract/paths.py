"""The service's path families, product route slugs and the paths that are no stream's own
(each stream's path is in the registry, ``ductwork.streams``)."""

from __future__ import annotations

from enum import StrEnum

PRODUCTS_PREFIX = "/products/v2.0"
INTERNAL_PREFIX = "/internal/v1.0"
DATA_WAREHOUSE_PREFIX = "/warehouse/v1.0"
CRM_PREFIX = "/crm/v1.1"

# Route slug of each unit type, in the order the spec lists them.
UNIT_SLUGS: tuple[str, ...] = (
    "indoor-units",
    "outdoor-units",
    "branch-controllers",
    "branch-boxes",
    "ventilation",
    "accessories",
)

PRODUCTS_LIST = f"{PRODUCTS_PREFIX}/products"
UNITS_RESOLVER = f"{PRODUCTS_PREFIX}/units"
PIM_IMAGE_SYNC = f"{INTERNAL_PREFIX}/jobs/pim-image-sync"
# The two lists the upstream walks page through (``ductwork.upstream``).
DATA_WAREHOUSE_DIGITAL_ASSETS = f"{DATA_WAREHOUSE_PREFIX}/digital-assets"
LEADS = f"{CRM_PREFIX}/leads"


class Family(StrEnum):
    """A path family: it decides the error style of every answer under its prefix."""

    PRODUCTS = "products"
    DATA_WAREHOUSE = "warehouse"
    CRM = "crm"
    INTERNAL = "internal"


_PREFIXES: tuple[tuple[str, Family], ...] = (
    (PRODUCTS_PREFIX, Family.PRODUCTS),
    (DATA_WAREHOUSE_PREFIX, Family.DATA_WAREHOUSE),
    (CRM_PREFIX, Family.CRM),
    (INTERNAL_PREFIX, Family.INTERNAL),
)


# Each prefix with its folder form, made once: this runs for every request.
_FOLDERS = tuple((prefix, prefix + "/", family) for prefix, family in _PREFIXES)


def family_of(path: str) -> Family | None:
    """Return the family a request path belongs to, or None outside the four prefixes."""
    for prefix, folder, family in _FOLDERS:
        if path == prefix or path.startswith(folder):
            return family
    return None


def unit_path(slug: str) -> str:
    """The list path of one unit type, e.g. ``/products/v2.0/indoor-units``."""
    return f"{PRODUCTS_PREFIX}/{slug}"
