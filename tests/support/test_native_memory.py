"""kairox.support.native_memory: freed C-allocator pages really go back to the OS (glibc)."""

from __future__ import annotations

import ctypes
import platform

import pytest

from kairox.support.native_memory import return_freed_memory

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="needs glibc")


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


@glibc_only
def test_pages_freed_between_live_blocks_are_released():
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    # 96 MB of 4 KB blocks, one in 16 kept alive: the free space lies between live
    # blocks, where glibc's automatic trimming (top of the heap only) cannot reach it.
    blocks = [libc.malloc(4096) for _ in range(24_576)]
    for block in blocks:
        ctypes.memset(block, 1, 4096)
    kept = blocks[::16]
    for i, block in enumerate(blocks):
        if i % 16:
            libc.free(block)
    before = resident_bytes()
    assert return_freed_memory() is True
    after = resident_bytes()
    for block in kept:
        libc.free(block)
    assert before - after > 40 * 2**20, (before, after)
