"""The public API type-checks strictly: ``pyright --strict`` passes on a program that uses all
of it (``typed_program.py``, whose ``assert_type`` lines pin what is inferred), and fails on
a misspelt name (no module ``__getattr__`` turns it into ``Any``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = Path(__file__).with_name("typed_program.py")


def pyright(*files: Path) -> dict[str, list[str]]:
    """Each file's error messages, by file name."""
    exe = shutil.which("pyright", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("pyright is not installed (the dev dependencies have it)")
    done = subprocess.run(
        [exe, "--outputjson", *map(str, files)], cwd=ROOT, capture_output=True, text=True
    )
    report = json.loads(done.stdout)
    found: dict[str, list[str]] = {f.name: [] for f in files}
    for d in report["generalDiagnostics"]:
        if d["severity"] == "error":
            found[Path(d["file"]).name].append(d["message"])
    return found


def test_strict_pyright_passes_on_the_whole_api_and_fails_on_a_misspelt_name(
    tmp_path: Path,
) -> None:
    misspelt = tmp_path / "misspelt.py"
    misspelt.write_text(
        "# pyright: strict\nfrom retinue import Agnet\nimport retinue\n\n"
        "print(Agnet, retinue.ScriptedModle)\n"
    )
    found = pyright(PROGRAM, misspelt)
    assert found[PROGRAM.name] == []
    errors = "\n".join(found[misspelt.name])
    assert '"Agnet" is unknown import symbol' in errors
    assert '"ScriptedModle" is not a known attribute of module "retinue"' in errors
