"""kairox_tantivy's modules import each other without a circle (lazy imports counted)."""

from __future__ import annotations

from kairox.testing.imports import import_cycles


def test_the_package_has_no_import_circle():
    assert import_cycles("kairox_tantivy") == []
