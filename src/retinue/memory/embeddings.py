"""Optional embeddings for archival search: an OpenAI-compatible ``/embeddings`` client.

Vectors are stored as float32 blobs next to each passage and compared by cosine similarity in
Python. ``sqlite-vec`` would do this inside SQLite, but it needs
``Connection.enable_load_extension``, which the Python builds this project runs on do not
offer; a scan in Python is O(n) per query, so it is capped to the newest passages of a scope
(:data:`VECTOR_SCAN_LIMIT`) and run in a worker thread.
"""

from __future__ import annotations

import math
import operator
import os
from array import array
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from retinue.errors import ConfigError, ModelError
from retinue.llm.guard import check_request_allowed

__all__ = [
    "VECTOR_SCAN_LIMIT",
    "Embedder",
    "OpenAIEmbedder",
    "cosine",
    "embedder_from_env",
    "pack",
    "top_by_cosine",
    "unpack",
]

VECTOR_SCAN_LIMIT = 20_000


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors (one per text, all of one length)."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class OpenAIEmbedder:
    """Embeddings from any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, Ollama, vLLM)."""

    def __init__(
        self, model: str, *, base_url: str | None = None, api_key: str | None = None
    ) -> None:
        from openai import AsyncOpenAI

        self.model = model
        self._client = AsyncOpenAI(base_url=base_url, api_key=api_key or "not-needed")
        self._base_url = str(self._client.base_url)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import openai

        check_request_allowed(self._base_url)
        try:
            reply = await self._client.embeddings.create(model=self.model, input=list(texts))
        except openai.OpenAIError as exc:
            raise ModelError(f"embedding request to {self._base_url} failed: {exc}") from None
        return [list(d.embedding) for d in sorted(reply.data, key=lambda d: d.index)]


def embedder_from_env() -> OpenAIEmbedder | None:
    """``RETINUE_EMBEDDING_MODEL`` (+ ``RETINUE_EMBEDDING_BASE_URL``, ``..._API_KEY``), if set."""
    model = os.environ.get("RETINUE_EMBEDDING_MODEL")
    if not model:
        return None
    base_url = os.environ.get("RETINUE_EMBEDDING_BASE_URL") or None
    api_key = os.environ.get("RETINUE_EMBEDDING_API_KEY") or os.environ.get("OPENAI_API_KEY")
    if base_url is None and not api_key:
        raise ConfigError(
            "RETINUE_EMBEDDING_MODEL is set but neither RETINUE_EMBEDDING_BASE_URL nor "
            "RETINUE_EMBEDDING_API_KEY / OPENAI_API_KEY is"
        )
    return OpenAIEmbedder(model, base_url=base_url, api_key=api_key)


def pack(vector: Sequence[float]) -> bytes:
    return array("f", vector).tobytes()


def unpack(blob: bytes) -> array[float]:
    out = array("f")
    out.frombytes(blob)
    return out


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    if len(a) != len(b):
        return 0.0
    dot = sum(map(operator.mul, a, b))
    na = math.sqrt(sum(map(operator.mul, a, a)))
    nb = math.sqrt(sum(map(operator.mul, b, b)))
    return dot / (na * nb) if na and nb else 0.0


def top_by_cosine(
    query: Sequence[float], rows: Iterable[tuple[int, bytes]], limit: int
) -> list[tuple[int, float]]:
    """The ``limit`` ids whose stored vectors are most similar to ``query``, best first."""
    scored = [(pid, cosine(query, unpack(blob))) for pid, blob in rows]
    scored.sort(key=lambda t: t[1], reverse=True)
    return scored[:limit]
