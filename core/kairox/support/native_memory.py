"""Handing memory that native libraries freed back to the operating system.

ONNX Runtime and torch allocate each batch's activations through the C allocator and free
them afterwards; glibc keeps freed pages in its per-thread arenas for reuse, so the
resident size of a long ``kairox index`` run climbs to the sum of the arenas' high-water
marks (one per inference thread). :func:`return_freed_memory` asks glibc to release them
(``malloc_trim``); elsewhere (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

__all__ = ["return_freed_memory"]


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
