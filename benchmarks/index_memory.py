"""`kairox index` peak memory, time and disk against the workspace's size (issue 34).

Builds synthetic workspaces of N files from the repositories fetched under
``/work/.mirror/*/repo`` (``git archive`` into a scratch folder; code and Markdown, each
copy with a marker line every 15 lines so no chunk repeats another) and indexes each
with the default hashing embedder in a fresh ``KAIROX_HOME``, then once more with
nothing changed. Peak RSS and CPU come from ``/usr/bin/time -v``. Nothing it builds is
kept: the workspaces and homes live under ``--scratch`` and are deleted at the end.

    python benchmarks/index_memory.py --sizes 500,2000,6000 \
        --out benchmarks/results/index-memory.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

SUFFIXES = re.compile(r"\.(py|md|rs|go|js|ts|c|h|txt|rst)$")
TIME_FIELDS = {
    "Maximum resident set size (kbytes)": "peak_rss_kb",
    "User time (seconds)": "user_s",
    "System time (seconds)": "system_s",
    "Elapsed (wall clock) time (h:mm:ss or m:ss)": "wall",
}


def source_texts(mirrors: Path, scratch: Path) -> list[tuple[Path, str]]:
    texts = []
    for repo in sorted(mirrors.glob("*/repo")):
        archive = scratch / f"{repo.parent.name}.tar"
        with archive.open("wb") as out:
            subprocess.run(["git", "-C", str(repo), "archive", "HEAD"], stdout=out, check=True)
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                if member.isfile() and SUFFIXES.search(member.name) and member.size < 200_000:
                    data = tar.extractfile(member)
                    assert data is not None
                    name = Path(repo.parent.name) / member.name
                    texts.append((name, data.read().decode("utf-8", "replace")))
        archive.unlink()
    return texts


def build_workspace(texts: list[tuple[Path, str]], files: int, root: Path) -> None:
    for i in range(files):
        source, text = texts[i % len(texts)]
        copy = i // len(texts)
        mark = {".py": "#", ".md": "", ".txt": "", ".rst": ""}.get(source.suffix, "//")
        lines = []
        for n, line in enumerate(text.splitlines()):
            if n % 15 == 0:
                lines.append(f"{mark} copy {copy} part {n} of {source.stem}".strip())
            lines.append(line)
        folder = root / f"d{i // 200:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{source.parent.name}_{copy}_{i}_{source.name}").write_text("\n".join(lines))


def timed_index(root: Path, home: Path) -> dict[str, object]:
    env = {**os.environ, "KAIROX_NO_DAEMON": "1", "KAIROX_HOME": str(home)}
    done = subprocess.run(
        ["/usr/bin/time", "-v", sys.executable, "-m", "kairox", "index", "--json", str(root)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    row: dict[str, object] = {"stats": json.loads(done.stdout)}
    for line in done.stderr.splitlines():
        label, _, value = line.strip().rpartition(": ")
        if label in TIME_FIELDS:
            row[TIME_FIELDS[label]] = value if label.startswith("Elapsed") else float(value)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500,2000,6000")
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="kairox-index-memory-", dir=args.scratch))
    try:
        texts = source_texts(args.mirrors, scratch)
        rows = []
        for files in (int(size) for size in args.sizes.split(",")):
            root, home = scratch / f"ws{files}", scratch / f"home{files}"
            build_workspace(texts, files, root)
            first = timed_index(root, home)
            disk = sum(p.stat().st_size for p in home.rglob("*") if p.is_file())
            again = timed_index(root, home)
            rows.append({"files": files, "first": first, "disk_bytes": disk, "unchanged": again})
            print(json.dumps(rows[-1]))
            shutil.rmtree(root)
            shutil.rmtree(home)
        load = os.getloadavg()
        result = {"load_average_1_5_15": load, "embedder": "hashing", "runs": rows}
        if args.out is not None:
            args.out.write_text(json.dumps(result, indent=2) + "\n")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
