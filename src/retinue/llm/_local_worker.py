"""The worker process that runs the embedded model: ``python -m retinue.llm._local_worker``.

The protocol is JSON lines. The parent writes the settings first (``{"path", "n_ctx",
"n_threads"}``), then requests: ``{"op": "generate", "id": N, ...}`` (see
:class:`~retinue.llm._local_engine.GenerateRequest`) and ``{"op": "cancel", "id": N}``.
The worker answers ``{"ready": true}`` once the model is loaded (or ``{"error": ...}`` and
exits), then per request any number of ``{"id", "text"}`` and ``{"id", "progress"}`` events
and one ``{"id", "done": {...}}`` or ``{"id", "error", "kind"}``.

A cancel may arrive before its request starts; either way generation stops at the next token.
End of input (the parent went away, however it ended) exits the worker at once, so it never
outlives the agent. SIGINT is ignored: Ctrl-C in a terminal cancels the parent's turn, which
cancels the request; it does not kill the model.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from retinue.errors import ContextTooLongError, RetinueError

if TYPE_CHECKING:
    from retinue.llm._local_engine import Emit, Engine


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Protocol output gets its own descriptor; anything native code prints goes to stderr.
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    settings = json.loads(sys.stdin.readline() or "{}")
    from retinue.llm._local_engine import Engine  # loads llama.cpp: only here, in the worker

    try:
        engine = Engine(settings["path"], int(settings["n_ctx"]), int(settings["n_threads"]))
    except RetinueError as exc:
        _send(out, {"error": str(exc), "kind": "load"})
        return 1
    _send(out, {"ready": True})
    requests: queue.Queue[dict[str, Any]] = queue.Queue()
    cancelled: set[int] = set()
    lock = threading.Lock()
    threading.Thread(target=_read, args=(requests, cancelled, lock), daemon=True).start()
    while True:
        message = requests.get()
        request_id = int(message["id"])

        def is_cancelled(request_id: int = request_id) -> bool:
            with lock:
                return request_id in cancelled

        def emit(event: dict[str, Any], request_id: int = request_id) -> None:
            _send(out, {"id": request_id, **event})

        try:
            emit({"done": _run(engine, message, emit, is_cancelled)})
        except RetinueError as exc:
            kind = "context" if isinstance(exc, ContextTooLongError) else "model"
            emit({"error": str(exc), "kind": kind})
        except (RecursionError, ValueError, TypeError, KeyError) as exc:
            # a hostile request (a tool schema nested too deep, say) fails that request only
            emit({"error": f"the local model cannot take this request: {exc!r}"[:500]})
        finally:
            with lock:
                cancelled.discard(request_id)


def _run(
    engine: Engine, message: dict[str, Any], emit: Emit, is_cancelled: Callable[[], bool]
) -> dict[str, Any]:
    if is_cancelled():  # cancelled while queued: skip the prompt processing too
        return {"text": "", "input_tokens": 0, "output_tokens": 0, "finish": "cancelled"}
    from retinue.llm._local_engine import GenerateRequest

    return engine.generate(GenerateRequest.from_wire(message), emit, is_cancelled)


def _read(requests: queue.Queue[dict[str, Any]], cancelled: set[int], lock: threading.Lock) -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("op") == "cancel":
            with lock:
                cancelled.add(int(message["id"]))
        elif message.get("op") == "generate":
            requests.put(message)
    os._exit(0)  # the parent is gone: stop now, even mid-generation


def _send(out: IO[str], event: dict[str, Any]) -> None:
    out.write(json.dumps(event) + "\n")


if __name__ == "__main__":
    sys.exit(main())
