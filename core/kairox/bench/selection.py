"""What ``kairox bench retrieval`` runs, from its options: the data (a BEIR folder, your
``--queries``/``--qrels``, or both), the system names, and how hits match judged ids."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kairox.bench.beir import BeirDataset, load_beir
from kairox.bench.judgments import IdMatcher, custom_dataset, judged_ids
from kairox.bench.profile import BenchUsageError, Systems, corpus_root, workspace_sources

if TYPE_CHECKING:
    from kairox.runtime.facade import AppFacade

DEFAULT_SYSTEMS = "sqlite-fts,hashing,peers"


@dataclass
class Selection:
    dataset: BeirDataset
    names: list[str]
    systems: Systems
    matcher: IdMatcher


def load_data(
    dataset: Path | None,
    split: str,
    queries_file: Path | None,
    qrels_file: Path | None,
) -> BeirDataset:
    """The benchmark's data: a BEIR folder, your queries and qrels, or both (your
    judgments over the folder's corpus)."""
    if (queries_file is None) != (qrels_file is None):
        raise BenchUsageError("--queries and --qrels go together: give both")
    corpus = load_beir(dataset, split) if dataset is not None else None
    if queries_file is not None and qrels_file is not None:
        return custom_dataset(queries_file, qrels_file, corpus=corpus)
    if corpus is None:
        raise BenchUsageError("give --dataset (a BEIR folder) or --queries and --qrels")
    return corpus


def parse_kind_configs(items: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``NAME={"key": value}`` items -> kind -> settings."""
    configs: dict[str, dict[str, Any]] = {}
    for item in items:
        kind, sep, raw = item.partition("=")
        if not sep or not kind.strip():
            raise BenchUsageError(f"--kind-config {item!r}: expected NAME='{{\"key\": value}}'")
        try:
            settings = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise BenchUsageError(f"--kind-config {item!r}: not JSON ({exc})") from None
        if not isinstance(settings, dict):
            raise BenchUsageError(f"--kind-config {item!r}: expected a JSON object")
        configs[kind.strip()] = settings
    return configs


def select(
    app: Any,
    *,
    dataset: Path | None,
    split: str,
    systems: str | None,
    profile: str | None,
    kbs: str | None,
    workspace: bool,
    queries_file: Path | None,
    qrels_file: Path | None,
    kind_configs: Sequence[str] = (),
) -> Selection:
    """Resolve the options of ``kairox bench retrieval`` (``app`` has ``facade()``)."""
    data = load_data(dataset, split, queries_file, qrels_file)
    raw = systems if systems is not None else ("" if profile else DEFAULT_SYSTEMS)
    names = [name.strip() for name in raw.split(",") if name.strip()]
    narrow: set[str] | None = None
    if (kbs or workspace) and profile is None:
        raise BenchUsageError("--kb and --workspace narrow a profile: give --profile NAME")
    needs_facade = profile is not None or any(n.startswith(("profile:", "kb:")) for n in names)
    facade: AppFacade | None = app.facade() if needs_facade else None
    if profile is not None and facade is not None:
        resolved = facade.resolve_profile(profile)
        if kbs:
            narrow = {kb.strip() for kb in kbs.split(",") if kb.strip()}
            known = {e.id for e in facade.config.visible_knowledge_bases(resolved)}
            unknown = sorted(narrow - known)
            if unknown:
                raise BenchUsageError(
                    f"--kb {', '.join(unknown)}: profile {resolved!r} searches no such "
                    f"knowledge base (it sees: {', '.join(sorted(known)) or 'none'})"
                )
        if workspace:
            narrow = (narrow or set()) | workspace_sources(facade)
        names.insert(0, f"profile:{profile}")
    if not names:
        raise BenchUsageError("name at least one system (--systems or --profile)")
    if not data.corpus and any(not n.startswith(("profile:", "kb:")) for n in names):
        raise BenchUsageError(
            "built-in and kind: systems are built on a corpus: give --dataset (your "
            "--queries/--qrels then judge its documents)"
        )
    return Selection(
        dataset=data,
        names=names,
        systems=Systems(
            facade, profile=profile, narrow=narrow, kind_configs=parse_kind_configs(kind_configs)
        ),
        matcher=IdMatcher(judged_ids(data), root=corpus_root(facade)),
    )
