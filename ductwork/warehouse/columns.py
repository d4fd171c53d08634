"""The columns of a table the sync writes, declared without importing pyarrow.

pyarrow (and the numpy it loads) is needed only once a sync has rows to write, while the asset
modules that declare their tables load in every run: a run with nothing new to store never
imports it.
"""

from __future__ import annotations

import importlib.abc
import sys
from functools import cache, cached_property
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

# The column types the warehouse's tables use, by the name a declaration gives them.
TYPES = ("string", "int32", "int64", "float64", "bool", "timestamp")


@cache
def pyarrow_without_pandas() -> ModuleType:
    """pyarrow, for converting Python rows, without the pandas import its first conversion
    makes.

    pyarrow's first conversion of Python objects (and its first conversion to NumPy) imports
    pandas only to ask whether they are pandas objects; that import costs about 45 MiB of
    resident memory and 0.2 to 0.4 s, and no writer hands pyarrow a pandas object. pyarrow asks
    once per process and keeps the answer, so it is asked here with the import refused (for that
    one call, in every thread; nothing in a sync imports pandas meanwhile). ``import pandas``
    works as before afterwards, and so do pyarrow's own pandas conversions (``to_pandas``
    imports pandas when called). In a process that has already imported pandas, nothing is saved
    and nothing is done.

    Arrow allocates from the system allocator from then on (``_freeing_memory_pool``).
    """
    import pyarrow as pa

    _freeing_memory_pool(pa)

    if "pandas" not in sys.modules:
        refusal = _RefusePandas()
        sys.meta_path.insert(0, refusal)
        try:
            pa.array([], type=pa.null())
            # Arrow's conversion to NumPy asks the same question through another door.
            pa.array([0], type=pa.int64()).to_numpy()
        finally:
            sys.meta_path.remove(refusal)
    return pa


def _freeing_memory_pool(pa: ModuleType) -> None:
    """Make the system allocator Arrow's default memory pool.

    Arrow's own pool (mimalloc in these wheels) keeps the pages of freed batches for reuse; a
    sync builds and drops batches of different sizes step after step, and with it held about
    25 MiB more at its peak (a medium full sync) than with the system allocator, which returns
    large blocks as they are freed.
    """
    pa.set_memory_pool(pa.system_memory_pool())


class _RefusePandas(importlib.abc.MetaPathFinder):
    """An import finder under which ``import pandas`` fails as if pandas were not installed."""

    def find_spec(self, fullname: str, path: object, target: object = None) -> None:
        if fullname == "pandas" or fullname.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def _arrow_type(name: str) -> pa.DataType:
    import pyarrow as pa

    if name == "timestamp":
        return pa.timestamp("us", tz="UTC")
    return {
        "string": pa.string(),
        "int32": pa.int32(),
        "int64": pa.int64(),
        "float64": pa.float64(),
        "bool": pa.bool_(),
    }[name]


class Columns:
    """Named, typed columns (``("sku", "string")``, ``("synced_at", "timestamp")``: UTC,
    microseconds); the Arrow schema is built the first time a table is."""

    def __init__(self, *columns: tuple[str, str]) -> None:
        unknown = sorted({kind for _, kind in columns} - set(TYPES))
        if unknown:
            raise ValueError(f"unknown column types {unknown}; known: {', '.join(TYPES)}")
        self.columns = columns

    @property
    def names(self) -> list[str]:
        """The column names, in order."""
        return [name for name, _ in self.columns]

    @cached_property
    def schema(self) -> pa.Schema:
        """The Arrow schema."""
        import pyarrow as pa

        return pa.schema([(name, _arrow_type(kind)) for name, kind in self.columns])

    @cached_property
    def row_type(self) -> pa.StructType:
        """A row as one Arrow struct of the columns."""
        import pyarrow as pa

        return pa.struct(list(self.schema))

    def table(self, rows: list[dict[str, Any]]) -> pa.Table:
        """An Arrow table of ``rows`` (dicts by column name; a missing column is null, a key
        that is no column is ignored)."""
        pa = pyarrow_without_pandas()
        # Converted as one struct array, whose converter reads each dict in C: from_pylist
        # walks the rows once per column in Python and took about twice as long, on the
        # thread that stores pages while the event loop waits for the GIL to fetch the next.
        return pa.Table.from_struct_array(pa.array(rows, type=self.row_type))

    def __repr__(self) -> str:
        return f"Columns{self.columns!r}"
