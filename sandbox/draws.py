"""Cheap deterministic draws for bulk generation.

``random.Random`` costs a method call per value; generating a million records that way is
slow. ``Draws`` takes one large random integer and spends it digit by digit in mixed radix,
so a record needs one call into the generator (or one hash) and then only integer arithmetic.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # in byte order


class Draws:
    """Values drawn from one random integer (about 500 bits is plenty for a record)."""

    __slots__ = ("_value",)

    def __init__(self, value: int) -> None:
        self._value = value

    @classmethod
    def keyed(cls, seed: int, stream: str, number: int) -> Draws:
        """Draws for one numbered record of a stream, reproducible without generating the rest."""
        digest = hashlib.blake2b(f"{seed}:{stream}:{number}".encode(), digest_size=64).digest()
        return cls(int.from_bytes(digest, "little"))

    def below(self, bound: int) -> int:
        """An integer in ``[0, bound)``."""
        self._value, digit = divmod(self._value, bound)
        return digit

    def between(self, low: int, high: int) -> int:
        """An integer in ``[low, high]``."""
        return low + self.below(high - low + 1)

    def pick(self, options: Sequence[T]) -> T:
        """One element of ``options``."""
        return options[self.below(len(options))]

    def percent(self, chance: float) -> bool:
        """True with probability ``chance`` percent (to a hundredth of a percent)."""
        return self.below(10_000) < chance * 100

    def text(self, length: int, alphabet: str = BASE62) -> str:
        """``length`` characters of ``alphabet``."""
        return "".join(alphabet[self.below(len(alphabet))] for _ in range(length))


def base62(number: int, width: int) -> str:
    """``number`` in base 62, left-padded with ``0`` to ``width`` characters."""
    digits = []
    while number:
        number, digit = divmod(number, 62)
        digits.append(BASE62[digit])
    return "".join(reversed(digits)).rjust(width, "0")


def from_base62(text: str) -> int | None:
    """The number a ``base62`` text encodes, or None if it holds other characters."""
    value = 0
    for char in text:
        digit = BASE62.find(char)
        if digit < 0:
            return None
        value = value * 62 + digit
    return value
