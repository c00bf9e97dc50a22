"""The parent's side of the embedded model's worker process.

One :class:`LocalWorker` per (model file, n_ctx, n_threads) is shared by the whole process
(:func:`worker_for`), so sub-agents do not start their own. It starts on first use, runs one
generation at a time, and when the worker dies (a segmentation fault or illegal instruction in
native code, an out-of-memory kill) the request fails with a :class:`ModelError` naming the
cause, and the next request starts a fresh worker. A cancelled request is cancelled in the
worker; a worker that does not stop within :data:`CANCEL_GRACE` seconds (stuck in prompt
processing) is killed and restarted on the next request.

The calls here block; :class:`~retinue.llm.local.LocalModel` runs them in a thread.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from retinue.errors import ContextTooLongError, ModelError

__all__ = ["CANCEL_GRACE", "LocalWorker", "close_workers", "describe_exit", "worker_for"]

CANCEL_GRACE = 2.0
"""Seconds a cancelled request may take to stop before its worker is killed."""

_START_TIMEOUT = 120.0

EventCallback = Callable[[dict[str, Any]], None]

_CAUSES = {
    signal.SIGSEGV: "segmentation fault in llama.cpp",
    signal.SIGILL: "illegal instruction: this llama.cpp build uses CPU instructions this "
    "processor lacks",
    signal.SIGKILL: "killed, usually by the kernel for lack of memory",
    signal.SIGBUS: "bus error reading the model file",
    signal.SIGABRT: "aborted by llama.cpp",
    signal.SIGFPE: "arithmetic fault in llama.cpp",
}


def describe_exit(returncode: int | None) -> str:
    """One line: how the worker ended, and what to do about it."""
    if returncode is not None and returncode < 0:
        try:
            sig = signal.Signals(-returncode)
            how = f"{sig.name}: {_CAUSES.get(sig, 'killed by a signal')}"
        except ValueError:
            how = f"signal {-returncode}"
    else:
        how = f"exit status {returncode}"
    return (
        f"the local model's worker process died ({how}); run `retinue doctor` to check this "
        "machine. The next request starts a new worker."
    )


class LocalWorker:
    """A worker process running one model; thread-safe, one generation at a time."""

    def __init__(self, path: Path, n_ctx: int, n_threads: int) -> None:
        self.settings = {"path": str(path), "n_ctx": n_ctx, "n_threads": n_threads}
        self._proc: subprocess.Popen[str] | None = None
        self._run_lock = threading.Lock()  # one request at a time
        self._io_lock = threading.Lock()  # writes to stdin; the process handle
        self._current: int | None = None
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self.starts = 0

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def start(self) -> None:
        """Start the worker and load the model, unless it is running."""
        with self._run_lock:
            self._ensure()

    def generate(
        self,
        request_id: int,
        payload: dict[str, Any],
        on_event: EventCallback,
        cancelled: threading.Event,
    ) -> dict[str, Any]:
        """Run one request; ``on_event`` gets its text and progress events as they arrive."""
        with self._run_lock:
            if cancelled.is_set():
                return {"text": "", "input_tokens": 0, "output_tokens": 0, "finish": "cancelled"}
            proc = self._ensure()
            self._current = request_id
            try:
                self._write(proc, {"op": "generate", "id": request_id, **payload})
                return self._collect(proc, request_id, on_event)
            finally:
                self._current = None

    def cancel(self, request_id: int) -> None:
        """Stop ``request_id`` at the next token; kill the worker if it has not stopped soon."""
        with self._io_lock:
            proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        self._write(proc, {"op": "cancel", "id": request_id})
        timer = threading.Timer(CANCEL_GRACE, self._kill_if_running, (proc, request_id))
        timer.daemon = True
        timer.start()

    def close(self) -> None:
        with self._io_lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            _stop(proc)

    def _ensure(self) -> subprocess.Popen[str]:
        with self._io_lock:
            proc = self._proc
        if proc is not None and proc.poll() is None:
            return proc
        proc = subprocess.Popen(
            [sys.executable, "-m", "retinue.llm._local_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )
        self.starts += 1
        assert proc.stderr is not None
        threading.Thread(target=self._drain, args=(proc.stderr,), daemon=True).start()
        with self._io_lock:
            self._proc = proc
        self._write(proc, self.settings)
        too_slow = threading.Event()

        def give_up() -> None:
            too_slow.set()
            proc.kill()

        timer = threading.Timer(_START_TIMEOUT, give_up)
        timer.daemon = True
        timer.start()
        try:
            first = self._next_event(proc)
        except ModelError:
            if too_slow.is_set():
                raise ModelError(
                    f"the local model's worker did not load the model within {_START_TIMEOUT:.0f}"
                    " s (is the machine overloaded?); run `retinue doctor` to check it"
                ) from None
            raise
        finally:
            timer.cancel()
        if "error" in first:
            _stop(proc)
            raise ModelError(str(first["error"]))
        return proc

    def _collect(
        self, proc: subprocess.Popen[str], request_id: int, on_event: EventCallback
    ) -> dict[str, Any]:
        while True:
            event = self._next_event(proc)
            if event.get("id") != request_id:
                continue  # a late event of an earlier, abandoned request
            if "done" in event:
                return event["done"]
            if "error" in event:
                error = ContextTooLongError if event.get("kind") == "context" else ModelError
                raise error(str(event["error"]))
            on_event(event)

    def _next_event(self, proc: subprocess.Popen[str]) -> dict[str, Any]:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise ModelError(describe_exit(self._reap(proc)))
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            _stop(proc)
            raise ModelError(
                f"the local model's worker sent an unreadable line: {line[:200]!r}"
            ) from None

    def _reap(self, proc: subprocess.Popen[str]) -> int | None:
        try:
            returncode = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _stop(proc)
            returncode = proc.returncode
        with self._io_lock:
            if self._proc is proc:
                self._proc = None
        return returncode

    def _write(self, proc: subprocess.Popen[str], message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        with self._io_lock:
            try:
                proc.stdin.write(json.dumps(message) + "\n")
                proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                pass  # it died; reading its output reports how

    def _kill_if_running(self, proc: subprocess.Popen[str], request_id: int) -> None:
        if self._current == request_id and proc.poll() is None:
            proc.kill()

    def _drain(self, stream: IO[str]) -> None:
        for line in stream:
            if line.strip():
                self.stderr_tail.append(line.rstrip())


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()  # end of input: the worker exits at once
    try:
        proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


_WORKERS: dict[tuple[str, int, int], LocalWorker] = {}
_WORKERS_LOCK = threading.Lock()


def worker_for(path: Path, n_ctx: int, n_threads: int) -> LocalWorker:
    """The process-wide worker for these settings (not started until first used)."""
    key = (str(path.resolve()), n_ctx, n_threads)
    with _WORKERS_LOCK:
        worker = _WORKERS.get(key)
        if worker is None:
            if not _WORKERS:
                atexit.register(close_workers)
            worker = _WORKERS[key] = LocalWorker(path, n_ctx, n_threads)
        return worker


def close_workers() -> None:
    """Stop every worker (at exit; also handy in tests)."""
    with _WORKERS_LOCK:
        workers = list(_WORKERS.values())
    for worker in workers:
        worker.close()
