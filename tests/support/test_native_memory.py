"""kairox.support.native_memory: freed C-allocator pages really go back to the OS (glibc)."""

from __future__ import annotations

import ctypes
import platform
import sys

import numpy as np
import pytest

from kairox.support.native_memory import (
    SCATTERED_ROWS,
    read_released,
    release_mapped,
    return_freed_memory,
)

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


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/statm")
def test_a_mapped_file_s_pages_leave_the_resident_set_and_read_back(tmp_path):
    path = tmp_path / "rows.npy"
    np.save(path, np.arange(16 * 2**20, dtype=np.int32).reshape(-1, 256))  # 64 MB
    rows = np.load(path, mmap_mode="r")
    before = resident_bytes()
    total = int(rows.sum(dtype=np.int64))  # every page read, so mapped
    read = resident_bytes()
    release_mapped(rows[10:20], None, np.zeros(3))  # a view of the map; others left alone
    after = resident_bytes()
    assert read - before > 48 * 2**20, (before, read)
    assert read - after > 48 * 2**20, (read, after)
    assert int(rows.sum(dtype=np.int64)) == total and rows[3, 5] == 3 * 256 + 5


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/statm")
def test_scattered_rows_read_a_few_at_a_time_leave_the_map_unresident(tmp_path):
    path = tmp_path / "rows.npy"
    np.save(path, np.arange(16 * 2**20, dtype=np.int32).reshape(-1, 256))  # 64 MB
    rows = np.load(path, mmap_mode="r")
    int(rows.sum(dtype=np.int64))  # every page cached
    release_mapped(rows)
    scattered = np.arange(0, len(rows), 16)  # one row in every 16 KB
    before = resident_bytes()
    parts = list(read_released(rows.__getitem__, scattered, rows))
    after = resident_bytes()
    assert len(parts) == -(-len(scattered) // SCATTERED_ROWS)
    np.testing.assert_array_equal(np.concatenate(parts), np.asarray(rows)[scattered])
    assert after - before < 16 * 2**20, (before, after)  # not the 64 MB the rows span
