"""Running one benchmarked system in a forked process, to measure its peak memory (the
resident set's high-water mark above its size at the fork)."""

from __future__ import annotations

import multiprocessing
import pickle
import platform
import resource
from typing import TYPE_CHECKING, Any

from kairox.bench import BenchError

if TYPE_CHECKING:
    from kairox.bench.retrieval import Bench, SystemRun


def _status_kib(field_name: str) -> int | None:
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _start_peak() -> int | None:
    """Reset the resident-set high-water mark to now (Linux) and return RSS in KiB."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")  # 5: reset VmHWM to the current RSS
    except OSError:
        pass  # a forked child's VmHWM starts at its RSS at the fork anyway
    return _status_kib("VmRSS")


def _peak_kib() -> int:
    peak = _status_kib("VmHWM")
    if peak is None:  # no /proc: ru_maxrss is KiB on Linux, bytes on macOS
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        if platform.system() == "Darwin":
            peak //= 1024
    return peak


def can_isolate() -> bool:
    """Whether systems can run in forked processes (needed to measure their memory)."""
    return "fork" in multiprocessing.get_all_start_methods() and _status_kib("VmRSS") is not None


def _child(conn: Any, bench: Bench, name: str) -> None:
    try:
        base = _start_peak()
        bench.progress = lambda what, done, total: conn.send(("progress", what, done, total))
        ran = bench.run(name)
        if base is not None:
            ran.peak_rss_mb = round(max(0, _peak_kib() - base) / 1024, 1)
        conn.send(("result", ran))
    except BaseException as exc:
        text = f"{type(exc).__name__}: {exc}"
        try:
            pickle.dumps(exc)
        except Exception:
            exc = BenchError(f"system {name!r} failed: {text}")
        conn.send(("error", exc))
    finally:
        conn.close()


def run_isolated(bench: Bench, name: str) -> SystemRun:
    """``bench.run(name)`` in a forked process that measures its peak memory."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(send, bench, name), daemon=True)
    process.start()
    send.close()
    try:
        while True:
            try:
                message = receive.recv()
            except EOFError:
                process.join()
                raise BenchError(
                    f"system {name!r} died without an answer (exit code {process.exitcode})"
                ) from None
            if message[0] == "progress":
                bench._report(*message[1:])
            elif message[0] == "result":
                return message[1]
            else:
                raise message[1]
    finally:
        receive.close()
        process.join(timeout=30)
        if process.is_alive():
            process.kill()
            process.join()
