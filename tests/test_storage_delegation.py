"""`kclient.storage.delegation`: the members a `Log` serves from the
`LocalLog` it holds, and ``Log.open`` as its constructor."""

from __future__ import annotations

import pytest

from kclient.storage.delegation import Forwarded, constructor, forwarded
from kclient.storage.local_log import LocalLog
from kclient.storage.log import Log

pytestmark = pytest.mark.unit


class _Held:
    def __init__(self) -> None:
        self.size = 3

    @property
    def doubled(self) -> int:
        return self.size * 2

    def add(self, n: int, *, times: int = 1) -> int:
        """Add ``n`` ``times`` times."""
        self.size += n * times
        return self.size


class _Holder:
    size = Forwarded[int]()
    doubled = Forwarded[int]()
    add = forwarded(_Held.add)

    def __init__(self, start: int = 0, *, label: str = "") -> None:
        self._local = _Held()
        self._local.size += start
        self.label = label

    make = constructor(__init__)


def test_forwarded_members_read_and_write_the_held_object():
    holder = _Holder()
    assert (holder.size, holder.doubled) == (3, 6)
    assert holder.add(2, times=2) == 7 and holder._local.size == 7
    holder.size = 10  # a plain attribute of the held object: written there
    assert holder._local.size == 10 and "size" not in vars(holder)
    with pytest.raises(AttributeError):
        holder.doubled = 1  # a read-only property stays read-only
    # Read on the class: the descriptor, or the method as a plain function.
    assert isinstance(_Holder.__dict__["size"], Forwarded)
    assert _Holder.add(holder, 1) == 11
    assert _Holder.add.__doc__ == _Held.add.__doc__


def test_constructor_is_the_class_under_another_name():
    holder = _Holder.make(4, label="x")
    assert type(holder) is _Holder and holder.size == 7 and holder.label == "x"


def test_log_holds_a_local_log_and_serves_its_members(tmp_path):
    log = Log.open(tmp_path / "t-0", clean_shutdown=True)
    try:
        assert not isinstance(log, LocalLog) and isinstance(log._local, LocalLog)
        assert log.read_slice.__self__ is log._local
        assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
        assert log.name == "t-0" and log.segments == log._local.segments
        assert Log.read_slice.__doc__ == LocalLog.read_slice.__doc__
    finally:
        log.close()
    assert log.closed and log._local.closed
