"""The installed llama.cpp is the portable build: no instructions beyond the x86-64 baseline
that pyproject.toml asks for (AVX2/FMA/F16C), so it runs on CPUs other than the build
machine's. A native build on an AVX-512/AMX machine fails this test instead of crashing
elsewhere."""

from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path

import pytest

llama_cpp = pytest.importorskip("llama_cpp")


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64 instruction check")
@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs objdump (binutils)")
def test_the_cpu_backend_uses_no_avx512_or_amx_instructions() -> None:
    libs = list((Path(llama_cpp.__file__).parent / "lib").glob("libggml-cpu*.so"))
    assert libs, "llama-cpp-python ships no libggml-cpu library"
    for lib in libs:
        listing = subprocess.run(
            ["objdump", "-d", "--no-show-raw-insn", str(lib)],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        assert "ymm" in listing  # AVX2 is used: the check can see vector instructions
        assert "zmm" not in listing, f"{lib.name} uses AVX-512"
        assert "ldtilecfg" not in listing, f"{lib.name} uses Intel AMX"
