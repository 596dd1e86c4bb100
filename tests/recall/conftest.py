"""A workspace whose sessions are fed through the facade, for the recall tests."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kairox.runtime.facade import AppFacade
from tests.conftest import SCRIPTED_DEFAULT_PROFILE


def write_config(workspace: Path, recall: str = "") -> None:
    (workspace / "kairox.toml").write_text(SCRIPTED_DEFAULT_PROFILE + recall)


@pytest.fixture
def facade(workspace: Path):
    write_config(workspace)
    with AppFacade(cwd=workspace) as opened:
        yield opened


def record(facade: AppFacade, session: str, messages: Sequence[dict[str, Any]]) -> list[int]:
    """Append ``messages`` to ``session``; their event ids."""
    return asyncio.run(facade.append_messages(session, messages)).event_ids


def said(speaker: str, text: str, time: str = "2023-05-08T13:56:00", role: str = "user"):
    return {"role": role, "content": text, "name": speaker, "time": time}
