"""``with`` support for closable objects (kairox.support.closing)."""

from __future__ import annotations

import pytest

from kairox.support.closing import ClosedOnExit


class _Resource(ClosedOnExit):
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_leaving_the_block_closes_once_and_the_block_gets_the_object() -> None:
    resource = _Resource()
    with resource as entered:
        assert entered is resource and resource.closed == 0
    assert resource.closed == 1


def test_an_error_in_the_block_still_closes_and_is_not_swallowed() -> None:
    resource = _Resource()
    with pytest.raises(KeyError), resource:
        raise KeyError("boom")
    assert resource.closed == 1


def test_a_subclass_without_close_says_so_on_exit() -> None:
    with pytest.raises(NotImplementedError), ClosedOnExit():
        pass
