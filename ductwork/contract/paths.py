"""The service's path families and product route slugs: the one list every module uses."""

from __future__ import annotations

from enum import StrEnum

PRODUCTS_PREFIX = "/products/v2.0"
INTERNAL_PREFIX = "/internal/v1.0"
WAREHOUSE_PREFIX = "/warehouse/v1.0"
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
PAIRINGS_LIST = f"{PRODUCTS_PREFIX}/pairings"
UNITS_RESOLVER = f"{PRODUCTS_PREFIX}/units"
CONTRACTORS = f"{INTERNAL_PREFIX}/accounts/contractors"
INDOOR_MODELS = f"{INTERNAL_PREFIX}/products/indoor-models"
INTERNAL_DIGITAL_ASSETS = f"{INTERNAL_PREFIX}/digital-assets"
PIM_IMAGE_SYNC = f"{INTERNAL_PREFIX}/jobs/pim-image-sync"
WAREHOUSE_DIGITAL_ASSETS = f"{WAREHOUSE_PREFIX}/digital-assets"
SUBMITTAL_DATA = f"{WAREHOUSE_PREFIX}/submittal-data"
LEADS = f"{CRM_PREFIX}/leads"


class Family(StrEnum):
    """A path family: it decides the error style of every answer under its prefix."""

    PRODUCTS = "products"
    WAREHOUSE = "warehouse"
    CRM = "crm"
    INTERNAL = "internal"


_PREFIXES: tuple[tuple[str, Family], ...] = (
    (PRODUCTS_PREFIX, Family.PRODUCTS),
    (WAREHOUSE_PREFIX, Family.WAREHOUSE),
    (CRM_PREFIX, Family.CRM),
    (INTERNAL_PREFIX, Family.INTERNAL),
)


def family_of(path: str) -> Family | None:
    """Return the family a request path belongs to, or None outside the four prefixes."""
    for prefix, family in _PREFIXES:
        if path == prefix or path.startswith(prefix + "/"):
            return family
    return None


def unit_path(slug: str) -> str:
    """The list path of one unit type, e.g. ``/products/v2.0/indoor-units``."""
    return f"{PRODUCTS_PREFIX}/{slug}"
