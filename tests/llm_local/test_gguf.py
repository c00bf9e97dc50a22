"""Assembling a GGUF file from parts: order, size and checksum checks, atomic writes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from retinue.errors import ConfigError, ModelError
from retinue.llm._gguf import MODELS, GGUFModel, assemble, part_paths


@pytest.fixture
def parts(tmp_path: Path) -> list[Path]:
    out = []
    for i, data in enumerate([b"GGUF-head-", b"middle-" * 1000, b"-tail"]):
        p = tmp_path / f"part{i + 1:02d}.bin"
        p.write_bytes(data)
        out.append(p)
    return out


def expected(parts: list[Path]) -> bytes:
    return b"".join(p.read_bytes() for p in parts)


def test_assemble_concatenates_in_order_and_reports_progress(
    parts: list[Path], tmp_path: Path
) -> None:
    data = expected(parts)
    seen: list[int] = []
    dest = tmp_path / "models" / "m.gguf"
    out = assemble(
        parts, dest, size=len(data), sha256=hashlib.sha256(data).hexdigest(), progress=seen.append
    )
    assert out == dest
    assert dest.read_bytes() == data
    assert sum(seen) == len(data)
    assert list(dest.parent.iterdir()) == [dest]  # no temporary file left behind


def test_checksum_mismatch_is_a_model_error_and_leaves_nothing(
    parts: list[Path], tmp_path: Path
) -> None:
    data = expected(parts)
    dest = tmp_path / "models" / "m.gguf"
    with pytest.raises(ModelError, match="checksum"):
        assemble(parts, dest, size=len(data), sha256="0" * 64)
    assert list(dest.parent.iterdir()) == []


def test_size_mismatch_is_a_model_error(parts: list[Path], tmp_path: Path) -> None:
    data = expected(parts)
    dest = tmp_path / "m.gguf"
    with pytest.raises(ModelError, match="bytes, expected"):
        assemble(parts, dest, size=len(data) + 1, sha256=hashlib.sha256(data).hexdigest())
    assert not dest.exists()


def test_a_bad_assembly_does_not_replace_a_good_file(parts: list[Path], tmp_path: Path) -> None:
    dest = tmp_path / "m.gguf"
    dest.write_bytes(b"previous")
    with pytest.raises(ModelError):
        assemble(parts, dest, size=1, sha256="0" * 64)
    assert dest.read_bytes() == b"previous"


def test_wrong_part_order_fails_the_checksum(parts: list[Path], tmp_path: Path) -> None:
    data = expected(parts)
    with pytest.raises(ModelError, match="checksum"):
        assemble(
            list(reversed(parts)),
            tmp_path / "m.gguf",
            size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
        )


def test_missing_part_package_is_a_config_error_naming_the_extra() -> None:
    model = GGUFModel("x.gguf", ("retinue_no_such_part_pkg",), 1, "0" * 64)
    with pytest.raises(ConfigError, match="uv sync --extra local"):
        part_paths(model)


def test_embedded_model_parts_add_up_to_its_size() -> None:
    model = MODELS["qwen2.5-coder-0.5b"]
    try:
        paths = part_paths(model)
    except ConfigError:
        pytest.skip("the 'local' extra is not installed")
    assert [p.name for p in paths] == [f"part{i:02d}.bin" for i in range(1, 7)]
    assert sum(p.stat().st_size for p in paths) == model.size
