"""The table checks: ids as TOML writes them, the fix a bad id gets, problems collected."""

from __future__ import annotations

from pathlib import Path

from kairox.config.checks import TableChecks, sanitize_id, table_name
from kairox.config.files import Table


def test_a_table_name_quotes_an_id_only_when_toml_needs_it():
    assert table_name("knowledge_bases", "papers.v2") == "knowledge_bases.papers.v2"
    assert table_name("profiles", 'my "fast" one') == 'profiles."my \\"fast\\" one"'


def test_a_bad_id_gets_a_valid_one_to_rename_to():
    assert sanitize_id("my papers!") == "my-papers"
    assert sanitize_id("!!!") == "name"


class Checks(TableChecks):
    def __init__(self) -> None:
        self.problems = []


def test_every_problem_is_collected_not_raised(tmp_path: Path):
    checks = Checks()
    origin = tmp_path / "kairox.toml"
    checks.check_id("profiles", "bad id", origin)
    assert not checks.check_is_table("knowledge_bases", "papers", Table(raw=3, origin=origin))
    flagged = checks.check_secrets({"api_key": "sk-123", "url": "https://u:p@host"}, origin, "t")
    assert flagged == {"api_key", "url"}
    assert [p.key for p in checks.problems] == [None, "papers", "api_key", "url"]
    assert "rename the table, e.g. [profiles.bad-id]" in str(checks.problems[0])
