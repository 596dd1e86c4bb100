"""Where the bytes of a ``sqlite-fts`` knowledge base with vectors go.

Builds a ``kairox bench scale`` corpus of ``--size`` passages, ingests it as ``kairox bench
scale --vectors`` does (the ``kairox kb ingest`` child, its CPU and peak RSS measured), and
breaks the result down: SQLite's ``dbstat`` per table and index, and each file of the
vector pack. Run it with the code to measure first on ``PYTHONPATH``; compare two
checkouts by running both, interleaved::

    python benchmarks/kb_disk.py --dataset ../shared/datasets/scifact --size 100000 \\
        --vector-config '{"vector_format": "int8", "sentence_weight": 0.5}' \\
        --folder /tmp/kb-100k --out benchmarks/results/kb-disk-100k.json

The knowledge base stays in ``--folder`` (a new folder) for a closer look.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import apsw

from kairox.bench.scale import ingest_kb
from kairox.bench.scale_corpus import source_passages, write_corpus


def breakdown(folder: Path) -> dict:
    """Bytes of each table and index of ``folder/kb.db``, of each pack file, and row counts."""
    db = apsw.Connection(str(folder / "kb.db"), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        tables = dict(
            db.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC")
        )
        counts = {
            name: db.execute(f"SELECT count(*) FROM {name}").fetchone()[0]
            for (name,) in db.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table' AND name IN "
                "('documents', 'kb_texts', 'kb_passages', 'kb_sentences')"
            ).fetchall()
        }
    finally:
        db.close()
    packs: dict[str, int] = {}
    for path in sorted((folder / "kb.db.vectors").glob("*")):
        part = path.name.split(".", 1)[1]
        packs[part] = packs.get(part, 0) + path.stat().st_size
    files = {p.name: p.stat().st_size for p in folder.glob("kb.db*") if p.is_file()}
    return {"dbstat": tables, "packs": packs, "files": files, "counts": counts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, required=True, help="a BEIR folder")
    parser.add_argument("--size", type=int, required=True, help="passages")
    parser.add_argument("--vector-config", default="{}", help="more sqlite-fts settings (JSON)")
    parser.add_argument("--folder", type=Path, required=True, help="a new folder for the kb")
    parser.add_argument("--out", type=Path, help="write the JSON here too")
    args = parser.parse_args()
    config = json.loads(args.vector_config)
    args.folder.mkdir(parents=True)
    corpus = args.folder / "corpus.jsonl"
    text = write_corpus(source_passages(args.dataset), args.size, corpus)
    ran, source = ingest_kb(corpus, args.folder / "kb", vectors=True, settings=config)
    del source
    corpus.unlink()
    parts = breakdown(args.folder / "kb")
    disk = sum(parts["files"].values()) + sum(parts["packs"].values())
    report = {
        "passages": args.size,
        "vector_config": config,
        "text_bytes": text,
        "ingest_cpu_s": round(ran.cpu_s, 2),
        "ingest_wall_s": round(ran.wall_s, 2),
        "peak_rss_mb": round(ran.peak_rss_mb, 1),
        "disk_bytes": disk,
        "disk_per_text": round(disk / text, 3),
        "load_after": os.getloadavg(),
        **parts,
    }
    print(json.dumps(report, indent=1))
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
