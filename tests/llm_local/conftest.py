"""The data directory the real-model tests share, so the model file is assembled once, and the
model's vocabulary, with which llama.cpp itself parses grammars and checks text against them."""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from retinue.errors import ConfigError
from retinue.llm._gguf import MODELS, ensure_model_file, part_paths

GrammarAccepts = Callable[[str, str], bool]
"""``accepts(grammar, text)``: whether llama.cpp's grammar sampler lets ``text`` be generated
in full (every token allowed, then the end of generation)."""


@pytest.fixture(scope="session")
def model_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        part_paths(MODELS["qwen2.5-coder-0.5b"])
    except ConfigError:
        pytest.skip("the embedded model's part packages are not installed")
    return tmp_path_factory.mktemp("retinue-home")


@pytest.fixture(scope="session")
def vocab_model(model_home: Path) -> Any:
    """The embedded model loaded for its vocabulary only (no weights: quick)."""
    llama_cpp = pytest.importorskip("llama_cpp")
    path = ensure_model_file(MODELS["qwen2.5-coder-0.5b"], model_home)
    return llama_cpp.Llama(str(path), vocab_only=True, verbose=False)


@pytest.fixture(scope="session")
def grammar_accepts(vocab_model: Any) -> GrammarAccepts:
    llama_cpp: Any = pytest.importorskip("llama_cpp")

    vocab = vocab_model._model.vocab
    end = llama_cpp.llama_vocab_eos(vocab)

    def allowed(sampler: Any, token: int) -> bool:
        data = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 0.0, 0.0))
        candidates = llama_cpp.llama_token_data_array(data, 1, -1, False)
        llama_cpp.llama_sampler_apply(sampler, ctypes.byref(candidates))
        return not math.isinf(data[0].logit)

    def accepts(grammar: str, text: str) -> bool:
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
        assert sampler, "llama.cpp could not parse the grammar"
        try:
            tokens = vocab_model.tokenize(text.encode(), add_bos=False, special=False)
            for token in tokens:
                if not allowed(sampler, token):
                    return False
                llama_cpp.llama_sampler_accept(sampler, token)
            return allowed(sampler, end)
        finally:
            llama_cpp.llama_sampler_free(sampler)

    return accepts
