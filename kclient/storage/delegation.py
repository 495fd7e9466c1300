"""Members a class serves from elsewhere without a hand-written forwarder
(and a second copy of a signature) per member.

`kclient.storage.log.Log` holds a `kclient.storage.local_log.LocalLog`,
as Kafka's ``UnifiedLog`` holds its ``localLog``, and offers the segment
and offset members of its ``_local`` as its own: `Forwarded` for an
attribute or property, `forwarded` for a method. `constructor` makes a
class's constructor a class method under another name (``Log.open``).
All keep the member's signature for mypy; reading a forwarded member
costs one attribute lookup on the held object.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, overload

_C = TypeVar("_C")

_T = TypeVar("_T")
_P = ParamSpec("_P")
_R = TypeVar("_R")

#: The attribute of the holder that holds the object members are read from.
HELD = "_local"


class Forwarded(property, Generic[_T]):
    """An attribute (or property) of the held object, read, and written,
    under the same name on the holder: ``log_end_offset =
    Forwarded[int]()``.

    A `property` whose getter is an ``operator.attrgetter`` of the held
    object's member, set when the class is made: a read runs no Python
    frame of its own (the log's offsets are read per partition of every
    Produce and Fetch)."""

    _name = ""

    def __init__(self) -> None:
        super().__init__()

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name
        property.__init__(self, operator.attrgetter(f"{HELD}.{name}"), functools.partial(_set_held, name))

    if TYPE_CHECKING:

        @overload
        def __get__(self, obj: None, owner: type | None = None) -> Forwarded[_T]: ...

        @overload
        def __get__(self, obj: object, owner: type | None = None) -> _T: ...

        def __get__(self, obj: object | None, owner: type | None = None) -> _T | Forwarded[_T]: ...

        def __set__(self, obj: object, value: _T) -> None: ...


def _set_held(name: str, obj: object, value: object) -> None:
    # A read-only property of the held object raises AttributeError here.
    setattr(getattr(obj, HELD), name, value)


class _ForwardedMethod(property, Generic[_P, _R]):
    # A property whose getter is an ``operator.attrgetter`` of the held
    # object's method: reading it on an instance runs no Python frame.
    def __init__(self, method: Callable[Concatenate[Any, _P], _R]) -> None:
        super().__init__(operator.attrgetter(f"{HELD}.{method.__name__}"))
        self._name = method.__name__
        self.__doc__ = method.__doc__

    if TYPE_CHECKING:

        @overload
        def __get__(self, obj: None, owner: type | None = None) -> _ForwardedMethod[_P, _R]: ...

        @overload
        def __get__(self, obj: object, owner: type | None = None) -> Callable[_P, _R]: ...

        def __get__(self, obj: object | None, owner: type | None = None) -> Callable[_P, _R] | _ForwardedMethod[_P, _R]: ...

    def __call__(self, holder: Any, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        # Read on the class (``Log.read_slice(log, ...)``), as a plain function.
        method: Callable[_P, _R] = getattr(getattr(holder, HELD), self._name)
        return method(*args, **kwargs)


def forwarded(method: Callable[Concatenate[Any, _P], _R]) -> _ForwardedMethod[_P, _R]:
    """The held object's ``method`` as a method of the holder:
    ``read_slice = forwarded(LocalLog.read_slice)``.

    Args:
        method: The method, taken from the held object's class (its name
            and docstring are kept).

    Returns:
        A descriptor: on an instance, the held object's bound method.
    """
    return _ForwardedMethod(method)


def constructor(init: Callable[Concatenate[_C, _P], None]) -> classmethod[_C, _P, _C]:
    """A class method that builds an instance with the class's own
    ``__init__`` parameters: ``open = constructor(__init__)`` in the class
    body.

    Args:
        init: The class's ``__init__`` (its parameters become the class
            method's).

    Returns:
        The class method; ``cls.open(...)`` is ``cls(...)``.
    """

    def build(cls: type[_C], /, *args: _P.args, **kwargs: _P.kwargs) -> _C:
        return cls(*args, **kwargs)

    return classmethod(build)


__all__ = ["HELD", "Forwarded", "constructor", "forwarded"]
