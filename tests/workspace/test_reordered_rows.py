"""A pack's rows read through the order they are stored in."""

from __future__ import annotations

import numpy as np
import pytest

from kairox.workspace.reordered_rows import ReorderedRows

DIM = 4


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("count", [3, 200, 70_000])
def test_reordered_rows_read_as_the_rows_they_reorder(tmp_path, count, streamed) -> None:
    """A few rows (from the map, or the file), many (a span of the map at a time), one."""
    codes = np.random.default_rng(count).integers(-127, 128, (70_000, DIM), dtype=np.int8)
    order = np.random.default_rng(1).permutation(len(codes))
    np.save(tmp_path / "stored.npy", codes[order])
    stored = np.load(tmp_path / "stored.npy", mmap_mode="r")
    rows = ReorderedRows(stored, order)
    rows.streamed = streamed
    wanted = np.random.default_rng(2).choice(len(codes), count, replace=False)
    np.testing.assert_array_equal(rows[wanted], codes[wanted])
    np.testing.assert_array_equal(rows[5], codes[5])
    np.testing.assert_array_equal(rows[10:20], codes[10:20])
