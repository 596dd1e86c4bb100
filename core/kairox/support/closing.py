"""``with`` support for Kairox's closable objects, written once: leaving the block closes."""

from __future__ import annotations

from typing import Self

__all__ = ["ClosedOnExit"]


class ClosedOnExit:
    """``with`` support for anything with a ``close()``: leaving the block closes it."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
