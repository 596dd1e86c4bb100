"""Field types for knowledge-base schemas (kairox.config.fields)."""

from __future__ import annotations

import re

import pytest
from pydantic import BaseModel, ValidationError

from kairox.config.fields import matching

Slug = matching(re.compile(r"[a-z]+(-[a-z]+)*"), "{value!r} is not a slug: write e.g. 'my-notes'")


class _Table(BaseModel):
    name: Slug
    alias: Slug | None = None


def test_a_matching_value_is_kept_as_given() -> None:
    assert _Table(name="my-notes", alias=None).model_dump() == {"name": "my-notes", "alias": None}


@pytest.mark.parametrize("bad", ["My Notes", "notes-", "{x}", "notes\n"])
def test_a_value_that_does_not_match_whole_gets_the_schema_message(bad: str) -> None:
    with pytest.raises(ValidationError) as caught:
        _Table(name="ok", alias=bad)
    (error,) = caught.value.errors()
    assert error["loc"] == ("alias",)
    assert f"{bad!r} is not a slug: write e.g. 'my-notes'" in error["msg"]


def test_a_matching_field_stays_strict() -> None:
    with pytest.raises(ValidationError, match="string"):
        _Table(name=12)
