"""Immutable values stored as tuples, cheap to build on the client's hot
paths (one per record sent or consumed): the field descriptor they name
their items with (`tuplegetter`) and the value semantics they share
(`ValueTuple`)."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

try:  # the C field descriptor namedtuple uses: one call per attribute read
    from collections import _tuplegetter as tuplegetter  # type: ignore[attr-defined]
except ImportError:  # not CPython

    def tuplegetter(index: int, doc: str) -> Any:
        """A read-only attribute for item ``index`` (documented ``doc``)."""
        return property(itemgetter(index), doc=doc)


class ValueTuple(tuple[Any, ...]):
    """Base of a tuple-backed value: equal only to a value of the same
    type with equal items (never to a plain tuple), hashed as its items,
    pickled through its constructor's positional arguments."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = tuple.__hash__

    def __getnewargs__(self) -> tuple[Any, ...]:
        return tuple(self)


__all__ = ["ValueTuple", "tuplegetter"]
