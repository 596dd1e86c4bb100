"""Handing memory that native libraries freed back to the operating system.

ONNX Runtime and torch allocate each batch's activations through the C allocator and free
them afterwards; glibc keeps freed pages in its per-thread arenas for reuse, so the
resident size of a long ``kairox index`` run climbs to the sum of the arenas' high-water
marks (one per inference thread). :func:`return_freed_memory` asks glibc to release them
(``malloc_trim``); elsewhere (musl, macOS) it does nothing.

Pages of a memory-mapped file count toward the resident size too, once read: a pass over
a mapped vector pack of gigabytes holds all of it until the map is closed.
:func:`release_mapped` drops them from the process (``MADV_DONTNEED``; they stay in the
page cache, and a later read maps them again). A read of one scattered row maps the
whole cached folio around it (measured: 256 rows of 384 bytes spread over a pack of
784 MB mapped 103 MB): :func:`read_released` reads scattered rows a few at a time,
handing the pages back after each.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import mmap
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # no numpy for return_freed_memory's callers
    import numpy as np

__all__ = ["SCATTERED_ROWS", "read_released", "release_mapped", "return_freed_memory"]

#: Scattered rows read from a map between hand-backs of its pages (:func:`read_released`).
SCATTERED_ROWS = 64

_Part = TypeVar("_Part")


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def return_freed_memory() -> bool:
    """Release the C allocator's free pages to the OS; ``False`` where it cannot (no
    glibc). Cheap next to a batch of embeddings (it walks the free lists once)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def release_mapped(*arrays: np.ndarray | None) -> None:
    """Hand back the resident pages of the memory maps behind ``arrays`` (those not
    mapped, or ``None``, are left alone; so is every map where ``madvise`` is missing).
    The arrays stay valid: what is read next is paged in again."""
    advice = getattr(mmap, "MADV_DONTNEED", None)
    for array in arrays:
        base = array
        while base is not None and not isinstance(base, mmap.mmap):
            base = getattr(base, "base", None)
        if base is not None and advice is not None and not base.closed:
            base.madvise(advice)


def read_released(
    read: Callable[[Any], _Part], rows: Any, *arrays: np.ndarray | None
) -> Iterator[_Part]:
    """``read(part)`` of each :data:`SCATTERED_ROWS` of ``rows`` in turn (an array of row
    numbers, best ascending), the pages of the maps behind ``arrays`` handed back after
    each (:func:`release_mapped`): what the reads leave resident stays a few MB."""
    for start in range(0, len(rows), SCATTERED_ROWS):
        part = read(rows[start : start + SCATTERED_ROWS])
        release_mapped(*arrays)
        yield part
