"""An Arrow string array seen as a read-only sequence of ``str``, so that ``bisect`` searches
it in place: sorted keys kept as one Arrow array take some 20 bytes a key, against some 150
as Python strings in a list or dict."""

from __future__ import annotations

import pyarrow as pa


class StringSequence:
    """``len`` and indexing of an Arrow string array, each item as a ``str``."""

    def __init__(self, strings: pa.Array) -> None:
        self.strings = strings

    def __len__(self) -> int:
        return len(self.strings)

    def __getitem__(self, index: int) -> str:
        return self.strings[index].as_py()
