"""``retinue doctor``: check the environment a user asks about when something fails.

Each check is a small function that returns a :class:`Check` (passed, warning, failed or
skipped, a one-line detail, and a one-line fix for a warning or a failure). The ones that
inspect something take it as an argument (the ``/proc/cpuinfo`` text, a path, a URL and key,
a worker), so tests feed them directly. :func:`checks` runs them in order for this machine's
settings; the command prints one line per check (``✓`` passed, ``!`` warning, ``✗`` failed,
each of those two with its fix below, ``–`` skipped) and a summary line.

A *failure* is something that stops Retinue from working as configured (a model it cannot
reach, a data directory it cannot write); a *warning* is an optional component missing or a
risk worth knowing (no bubblewrap: shell commands run unsandboxed; a data directory other
users can read; transcripts waiting in ``pending/``). Exit status: 0 when nothing failed
(warnings or not), 1 when a check failed.

The embedded model's checks (model file, a 1-token generation in a worker process) run when
the main model is a ``local:`` one (the default when nothing is configured). A provider is
checked when it is the main model's or its API key is set: one ``GET`` of its models endpoint,
5 s at most; the key is shown redacted, never in full. Nothing here imports ``llama_cpp``: the
generation runs in the worker process, as the agent's own calls do.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

if TYPE_CHECKING:
    from retinue.config import Settings
    from retinue.llm._gguf import GGUFModel
    from retinue.llm._local_client import LocalWorker
    from retinue.tools.builtin.sandbox import Confinement

__all__ = [
    "REQUIRED_X86_FLAGS",
    "Check",
    "Provider",
    "check_bubblewrap",
    "check_cpu",
    "check_data_dir",
    "check_generation",
    "check_gguf_file",
    "check_local_extra",
    "check_local_tiers",
    "check_memory_db",
    "check_model_file",
    "check_pending",
    "check_provider",
    "check_python",
    "check_workspace_git",
    "checks",
    "doctor",
    "generation_failure",
    "installed_version",
    "provider_targets",
    "redact",
]

Status = Literal["ok", "warning", "failed", "skipped"]

REQUIRED_X86_FLAGS = ("sse4_2", "avx", "avx2", "bmi2", "fma", "f16c")
"""What the portable llama.cpp build (pyproject.toml) compiles in: ggml turns SSE4.2 and BMI2
on with AVX/AVX2/FMA/F16C when GGML_NATIVE is off. A CPU without one dies with SIGILL."""

_UNUSED_X86_FLAGS = {"avx512f": "AVX-512", "amx_tile": "AMX"}

_REBUILD = (
    "use a hosted model (set OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY), or build "
    "llama-cpp-python "
    'for this CPU (CMAKE_ARGS="-DGGML_NATIVE=ON")'
)
_MAX_DETAIL = 300


@dataclass(frozen=True, slots=True)
class Check:
    """The outcome of one check; ``detail`` and ``fix`` are single lines."""

    name: str
    status: Status
    detail: str
    fix: str = ""

    @classmethod
    def passed(cls, name: str, detail: str) -> Check:
        return cls(name, "ok", _one_line(detail))

    @classmethod
    def warning(cls, name: str, detail: str, fix: str) -> Check:
        return cls(name, "warning", *_detail_and_fix(detail, fix))

    @classmethod
    def failed(cls, name: str, detail: str, fix: str) -> Check:
        return cls(name, "failed", *_detail_and_fix(detail, fix))

    @classmethod
    def failed_with(cls, name: str, message: str, fix: str = "see the message above") -> Check:
        """A failure whose message may end with its own fix (``…; do this``): the fix is
        said once, on the fix line, and ``fix`` is used only when the message has none."""
        detail, own_fix = _split_fix(message)
        return cls.failed(name, detail, own_fix or fix)

    @classmethod
    def skipped(cls, name: str, detail: str) -> Check:
        return cls(name, "skipped", _one_line(detail))


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"


def _detail_and_fix(detail: str, fix: str) -> tuple[str, str]:
    """Both on one line each; a detail that ends with the fix (``…: set X``) loses it, so
    the fix is said once, on its own line."""
    detail, fix = _one_line(detail), _one_line(fix)
    if fix and detail.endswith(fix) and len(detail) > len(fix):
        detail = detail[: -len(fix)].rstrip(" :;,")
    return detail, fix


def _split_fix(message: str) -> tuple[str, str]:
    """``(what is wrong, the fix it states)`` of a message written ``…; do this``."""
    head, sep, tail = message.rpartition("; ")
    return (head, tail) if sep and head else (message, "")


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


# -- Python and packages -------------------------------------------------------------------


def check_python(version: tuple[int, ...] = tuple(sys.version_info[:3])) -> Check:
    shown = ".".join(map(str, version))
    if version >= (3, 11):
        return Check.passed("Python", f"{shown} ({sys.executable})")
    return Check.failed(
        "Python", f"{shown} is too old; Retinue needs 3.11 or newer", "run it with Python ≥ 3.11"
    )


def installed_version(distribution: str) -> str | None:
    """The installed version of ``distribution``, or ``None`` when it is not installed."""
    import importlib.metadata

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_local_extra(
    model: GGUFModel, *, required: bool, version_of: Callable[[str], str | None] = installed_version
) -> Check:
    """llama-cpp-python and the model's part packages; failed only when a local model is used."""
    names = ["llama-cpp-python", *(p.replace("_", "-") for p in model.packages)]
    versions = {name: version_of(name) for name in names}
    missing = [name for name, version in versions.items() if version is None]
    if not missing:
        parts = sorted({str(versions[n]) for n in names[1:]})
        return Check.passed(
            "local extra",
            f"llama-cpp-python {versions['llama-cpp-python']}, "
            f"{len(names) - 1} model part packages {', '.join(parts)}",
        )
    detail = f"not installed: {', '.join(missing)}"
    if required:
        return Check.failed("local extra", detail, model.install_hint)
    return Check.skipped("local extra", f"{detail} (needed only for local: models)")


def check_local_tiers(
    default: str, *, version_of: Callable[[str], str | None] = installed_version
) -> Check:
    """Which embedded models (tiers, each its own extra) have their part packages installed,
    and which one is the default (``default``, a ``local:`` name). Never fails: a tier nobody
    chose is not missing."""
    from retinue.llm._gguf import MODELS

    def state(name: str, model: GGUFModel) -> str:
        here = all(version_of(p.replace("_", "-")) for p in model.packages)
        mark = " (default)" if f"local:{name}" == default else ""
        size = f"{model.size / 1e9:.1f} GB"
        how = "installed" if here else f"not installed: extra {model.extra!r}, {size}"
        return f"local:{name}{mark} {how}"

    detail = "; ".join(state(name, model) for name, model in MODELS.items())
    return Check.passed("local models", detail)


# -- CPU -----------------------------------------------------------------------------------


def check_cpu(system: str, machine: str, cpuinfo: str | None) -> Check:
    """Whether this CPU runs the portable llama.cpp build; ``cpuinfo`` is /proc/cpuinfo's text."""
    arch = machine.lower()
    if arch in ("aarch64", "arm64"):
        return Check.passed("CPU", f"{arch}: the portable build needs nothing beyond armv8")
    if system != "Linux" or arch not in ("x86_64", "amd64"):
        return Check.skipped("CPU", f"flags not checked on {system} {machine}")
    flags = _cpu_flags(cpuinfo or "")
    if not flags:
        return Check.skipped("CPU", "no CPU flags found in /proc/cpuinfo")
    missing = [f for f in REQUIRED_X86_FLAGS if f not in flags]
    if missing:
        return Check.failed(
            "CPU",
            f"x86-64 without {', '.join(missing)}: the installed llama.cpp build needs them "
            "and would die with SIGILL (illegal instruction)",
            _REBUILD,
        )
    unused = [name for flag, name in _UNUSED_X86_FLAGS.items() if flag in flags]
    note = f"; {' and '.join(unused)} present, not used by this build" if unused else ""
    return Check.passed("CPU", f"x86-64 with {', '.join(REQUIRED_X86_FLAGS)}{note}")


def _cpu_flags(cpuinfo: str) -> set[str]:
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            return set(value.split())
    return set()


# -- the embedded model --------------------------------------------------------------------


def check_model_file(model: GGUFModel, home: Path) -> Check:
    """The model file in ``<home>/models``: assembled if absent, else size and SHA-256 checked."""
    import hashlib

    from retinue.errors import RetinueError
    from retinue.llm._gguf import ensure_model_file

    path = home / "models" / model.file_name
    name = "model file"
    try:
        if not path.is_file() or path.stat().st_size != model.size:
            ensure_model_file(model, home)  # verifies size and digest before it renames
            return Check.passed(name, f"{path} assembled ({model.size:,} bytes, SHA-256 checked)")
        with path.open("rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
    except RetinueError as exc:
        return Check.failed_with(name, str(exc))
    except OSError as exc:
        return Check.failed(name, f"cannot read {path}: {exc.strerror or exc}", _fix_home(home))
    if digest != model.sha256:
        return Check.failed(
            name,
            f"{path} failed its checksum (sha256 {digest[:16]}…, expected {model.sha256[:16]}…)",
            f"delete {path}; the next run (or `retinue doctor`) assembles it again",
        )
    return Check.passed(name, f"{path} ({model.size:,} bytes, SHA-256 verified)")


def check_gguf_file(path: Path) -> Check:
    """A GGUF file named by ``local:/path/x.gguf``: it exists and starts like one."""
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:
        return Check.failed(
            "model file", f"cannot read {path}: {exc.strerror or exc}", "check the path in --model"
        )
    if magic != b"GGUF":
        return Check.failed("model file", f"{path} is not a GGUF file", "check the path in --model")
    return Check.passed("model file", f"{path} ({path.stat().st_size:,} bytes)")


_SIGNAL_FIXES = {
    "SIGILL": _REBUILD,
    "SIGKILL": "free some memory (the embedded model needs about 1 GB) and try again",
}


def check_generation(worker: LocalWorker) -> Check:
    """Start ``worker``, generate one token, and stop it; the time of each step."""
    import threading

    from retinue.errors import RetinueError

    payload = {
        "messages": [{"role": "user", "content": "Say OK."}],
        "tools": [],
        "max_tokens": 1,
        "temperature": 0.0,
        "seed": 0,
        "constrain": False,
    }
    started = time.monotonic()
    try:
        worker.start()
        loaded = time.monotonic()
        done = worker.generate(0, payload, lambda _event: None, threading.Event())
    except RetinueError as exc:
        return generation_failure(str(exc), list(worker.stderr_tail))
    finally:
        worker.close()
    took = time.monotonic() - loaded
    tokens = _plural(int(done.get("output_tokens", 0)), "token")
    return Check.passed(
        "1-token generation",
        f"{took:.2f} s in a worker process ({tokens} out; model loaded in "
        f"{loaded - started:.2f} s)",
    )


def generation_failure(message: str, stderr_tail: list[str] | None = None) -> Check:
    """A failed generation: the worker's own message, less its advice to run this command."""
    detail = message.split("; run `retinue doctor`")[0]
    if stderr_tail:
        detail += f" (worker stderr: {stderr_tail[-1]})"
    fix = next((f for sig, f in _SIGNAL_FIXES.items() if sig in message), None)
    if fix is None:
        fix = (
            "reinstall llama-cpp-python (`uv sync --extra local --reinstall-package "
            "llama-cpp-python`); if it still fails, report the line above"
        )
    return Check.failed("1-token generation", detail, fix)


# -- providers -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Provider:
    """A hosted provider as doctor reaches it: where, with which key, its models endpoint."""

    name: str
    base_url: str
    key: str
    key_var: str
    models_path: str

    def headers(self) -> dict[str, str]:
        if self.name == "anthropic":
            return {"x-api-key": self.key, "anthropic-version": "2023-06-01"}
        if self.name == "gemini":
            return {"x-goog-api-key": self.key}
        return {"Authorization": f"Bearer {self.key}"}


def provider_targets(model: str, env: Mapping[str, str]) -> list[Provider | Check]:
    """The providers to reach: the main model's, and any whose API key is set in ``env``.

    A provider that cannot be reached for want of a key is a failed :class:`Check` instead.
    """
    from urllib.parse import urlsplit

    from retinue.errors import ConfigError
    from retinue.llm import anthropic, gemini, openai
    from retinue.llm._clients import api_key_for

    used = model.partition(":")[0]
    out: list[Provider | Check] = []
    for name, module, models_path in (
        ("openai", openai, "/models"),
        ("anthropic", anthropic, "/v1/models"),
        ("gemini", gemini, "/v1beta/models"),
    ):
        if used != name and not env.get(module.KEY_VAR):
            continue
        base_url = (env.get(module.URL_VAR) or module.DEFAULT_BASE_URL).rstrip("/")
        host = urlsplit(module.DEFAULT_BASE_URL).hostname or ""
        try:
            key = api_key_for(env.get(module.KEY_VAR), base_url, host, module.KEY_VAR)
        except ConfigError as exc:
            out.append(Check.failed(name, str(exc), f"set {module.KEY_VAR}"))
            continue
        out.append(Provider(name, base_url, key, module.KEY_VAR, models_path))
    return out


def redact(key: str) -> str:
    """``sk-…abcd``: enough to tell keys apart, never the key (short keys show nothing)."""
    from retinue.llm._clients import PLACEHOLDER_KEY

    if key == PLACEHOLDER_KEY:
        return "none"
    if len(key) < 16:
        return "…"
    return f"{key[:3]}…{key[-4:]}"


def check_provider(provider: Provider, *, timeout: float = 5.0) -> Check:
    """One GET of the provider's models endpoint: reachable, and the key accepted."""
    import httpx

    from retinue.errors import ModelError
    from retinue.llm.guard import ENV_VAR, check_request_allowed

    name, url = provider.name, provider.base_url + provider.models_path
    key = f"key {redact(provider.key)}"
    try:
        check_request_allowed(provider.base_url)
    except ModelError:
        return Check.skipped(name, f"{url} not contacted: real requests are off ({ENV_VAR}=1)")
    started = time.monotonic()
    try:
        response = httpx.get(url, headers=provider.headers(), timeout=timeout)
    except httpx.TimeoutException:
        return Check.failed(
            name, f"{url}: no answer within {timeout:g} s ({key})", _fix_url(provider)
        )
    except httpx.HTTPError as exc:
        reason = f"{type(exc).__name__}: {exc}"
        return Check.failed(name, f"{url}: {reason} ({key})", _fix_url(provider))
    took = f"HTTP {response.status_code} in {time.monotonic() - started:.2f} s"
    status = response.status_code
    if status in (401, 403):
        return Check.failed(
            name, f"{url}: {took}, the key was refused ({key})", f"check {provider.key_var}"
        )
    if status < 400 or status in (404, 405, 429):
        note = "" if status < 400 else " (reachable; the models list was not served)"
        return Check.passed(name, f"{url}: {took}{note}, {key}")
    return Check.failed(name, f"{url}: {took} ({key})", "try again later, or check the URL")


def _fix_url(provider: Provider) -> str:
    var = provider.key_var.replace("API_KEY", "BASE_URL")
    return f"check the network, a proxy, or {var}"


# -- data directory and memory -------------------------------------------------------------


def check_data_dir(home: Path) -> Check:
    """``home`` exists (or can be made, mode 0700) and a file can be written there; a
    warning when other users may read it (it holds conversations and memory)."""
    import stat
    import tempfile

    from retinue.config import make_private_dir

    name = "data directory"
    try:
        make_private_dir(home)
        with tempfile.NamedTemporaryFile(dir=home, prefix=".doctor-"):
            pass
        mode = stat.S_IMODE(home.stat().st_mode)
    except OSError as exc:
        return Check.failed(name, f"{home} is not writable: {exc.strerror or exc}", _fix_home(home))
    if mode & 0o077:
        return Check.warning(
            name,
            f"{home} is open to other users (mode {mode:04o}): they can read its "
            "conversations and memory",
            f"chmod 700 {home}",
        )
    return Check.passed(name, f"{home} is writable, and private (mode {mode:04o})")


def _fix_home(home: Path) -> str:
    return f"make {home} writable by you, or set RETINUE_HOME to a directory that is"


_STALE_INFLIGHT_S = 3600.0  # as `retinue memory retry` counts a transcript left in flight


def check_pending(root: Path, *, now: float | None = None) -> Check:
    """Transcripts waiting in ``<home>/pending``: consolidations that failed, or whose
    process stopped midway; what those sessions learned reaches memory only on a retry."""
    name = "pending transcripts"
    now = time.time() if now is None else now
    try:
        failed = sum(1 for _ in root.glob("*.failed.json"))
        stale = sum(
            1 for p in root.glob("*.inflight.json") if now - p.stat().st_mtime >= _STALE_INFLIGHT_S
        )
    except OSError as exc:
        return Check.warning(name, f"cannot read {root}: {exc.strerror or exc}", _fix_home(root))
    if not failed + stale:
        return Check.passed(name, f"none waiting in {root}")
    why = [f"{failed} failed" if failed else "", f"{stale} interrupted" if stale else ""]
    return Check.warning(
        name,
        f"{_plural(failed + stale, 'transcript')} waiting in {root} "
        f"({', '.join(w for w in why if w)}): what those sessions learned is not in memory yet",
        "run `retinue memory retry` (add --model when RETINUE_MODEL is not set)",
    )


def check_memory_db(path: Path) -> Check:
    """``PRAGMA integrity_check`` of the memory database; skipped when there is none yet."""
    import sqlite3

    name = "memory database"
    if not path.exists():
        return Check.skipped(name, f"{path} does not exist yet")
    fix = (
        f"copy {path} somewhere safe, then `sqlite3 {path} .recover` may save its content; "
        "or move it aside to start with empty memory"
    )
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True, timeout=5.0)
        try:
            rows = [str(r[0]) for r in conn.execute("PRAGMA integrity_check(20)")]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return Check.failed(name, f"{path}: {exc}", fix)
    if rows == ["ok"]:
        return Check.passed(name, f"{path}: integrity ok")
    return Check.failed(name, f"{path}: {len(rows)} problem(s), first: {rows[0]}", fix)


def check_memory_server(url: str, *, timeout: float = 15.0) -> Check:
    """That the PostgreSQL memory database at ``url`` answers (its schema migrated), and
    whether it has pgvector; the password never appears in what it says."""
    import asyncio

    from retinue.errors import RetinueError
    from retinue.memory import open_store
    from retinue.memory.postgres import PostgresMemory
    from retinue.store.postgres import describe_url

    name = "memory database"
    fix = (
        "check database_url (config.toml) or RETINUE_DATABASE_URL, that the server runs "
        "and accepts this user; unset it to use SQLite in the data directory"
    )

    async def probe() -> bool:
        store = open_store(Path("."), url)
        assert isinstance(store, PostgresMemory)
        try:
            await asyncio.wait_for(store.passage_count("doctor", "doctor"), timeout)
            return store.pgvector
        finally:
            await store.aclose()

    try:
        pgvector = asyncio.run(probe())
    except TimeoutError:
        return Check.failed(name, f"no answer in {timeout:g} s from {describe_url(url)}", fix)
    except RetinueError as exc:
        return Check.failed(name, _one_line(str(exc)), fix)
    vectors = "pgvector" if pgvector else "no pgvector: vectors compared in Python"
    return Check.passed(name, f"{describe_url(url)}: schema up to date, {vectors}")


# -- the shell sandbox ---------------------------------------------------------------------


def check_bubblewrap(system: str, problem: str | None, confined: str = "") -> Check:
    """Whether Bash commands run sandboxed; ``problem`` is ``bwrap_problem()``'s answer and
    ``confined`` says how far (:meth:`~retinue.tools.builtin.sandbox.Confinement.describe`)."""
    name = "bubblewrap"
    if system != "Linux":
        return Check.skipped(name, f"no sandbox on {system}: Bash runs with a reduced environment")
    if problem is None:
        return Check.passed(name, f"Bash commands run sandboxed ({confined or 'bubblewrap'})")
    problem = problem.split(" (Debian: ")[0]  # the fix line says how to install it
    return Check.warning(  # optional: everything works, with a weaker shell
        name,
        f"{problem}: Bash commands run unsandboxed (secrets still dropped from their environment)",
        "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap); in a container, "
        "allow user namespaces",
    )


_GIT_PROGRAMS = re.compile(
    r"core\.(fsmonitor|hookspath|sshcommand|pager|editor|askpass|gitproxy)"
    r"|diff\.external|sequence\.editor|credential\..*helper|gpg\.(.*\.)?program"
    r"|(diff|filter|merge)\..*\.(textconv|command|clean|smudge|process|driver)"
    r"|include(if\..*)?\.path|uploadpack\.packobjectshook"
)
_NOT_PROGRAMS = frozenset({"", "true", "false", "cat", "less", "/dev/null"})


def check_workspace_git(workspace: Path) -> Check:
    """Whether the workspace's git config names a program that the next ``git`` command
    there runs (``core.fsmonitor``, filters, aliases with ``!``...): worth a look, since
    whoever could write ``.git/config`` chose it."""
    name = "workspace git config"
    config = workspace / ".git" / "config"
    git = shutil.which("git")
    if git is None or not config.is_file():
        return Check.skipped(name, "no git repository here" if git else "git is not installed")
    listed = subprocess.run(
        [git, "config", "--file", str(config), "--null", "--list"],
        capture_output=True, text=True, timeout=10, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    named = []
    for item in listed.stdout.split("\0"):
        key, _, value = item.partition("\n")
        alias = key.startswith("alias.") and value.lstrip().startswith("!")
        if alias or (_GIT_PROGRAMS.fullmatch(key.lower()) and value not in _NOT_PROGRAMS):
            named.append(f"{key}={value[:60]}")
    if not named:
        return Check.passed(name, f"{config} names no program")
    return Check.warning(
        name,
        f"{config} names programs git runs: {'; '.join(named[:5])}",
        "check that you set these yourself (git config --file .git/config --list)",
    )


# -- the command ---------------------------------------------------------------------------


def _settings(model: str | None) -> tuple[Settings, Check]:
    """The settings (defaults when the file is broken, which fails this check) and the model."""
    from retinue.config import Settings, default_home
    from retinue.errors import ConfigError
    from retinue.llm.resolve import PROVIDERS
    from retinue.runtime import choose_model

    problem = None
    try:
        settings = Settings.load(model=model)
    except ConfigError as exc:  # the checks below still run, on what was asked for
        settings = Settings(home=default_home().resolve())
        settings.model = model or os.environ.get("RETINUE_MODEL")
        problem = Check.failed_with("settings", str(exc), f"fix {settings.config_file}")
    settings.model, notice = choose_model(settings)
    provider = settings.model.partition(":")[0]
    if problem is None and provider not in PROVIDERS:
        problem = Check.failed(
            "settings",
            f"model {settings.model}: unknown provider {provider!r}",
            f"use one of {', '.join(PROVIDERS)} (--model, RETINUE_MODEL or config.toml)",
        )
    why = " (none configured: picked by default)" if notice else ""
    detail = f"model {settings.model}{why}, data in {settings.home}"
    return settings, problem or Check.passed("settings", detail)


def checks(model: str | None = None) -> Iterator[Check]:
    """Every check for this machine, in order; ``model`` overrides the configured one."""
    from retinue.llm._gguf import MODELS
    from retinue.runtime import LOCAL_DEFAULT

    settings, loaded = _settings(model)
    yield loaded
    yield check_python()
    main = settings.model or ""
    local = main.partition(":")[2] if main.startswith("local:") else None
    default = LOCAL_DEFAULT.partition(":")[2]
    embedded = MODELS.get(local or default) or MODELS[default]
    extra = check_local_extra(embedded, required=local is not None)
    yield extra
    yield check_local_tiers(LOCAL_DEFAULT)
    yield check_cpu(platform.system(), platform.machine(), _read_cpuinfo())
    yield from _local_checks(local, settings.home, extra)
    for target in provider_targets(main, os.environ):
        yield target if isinstance(target, Check) else check_provider(target)
    yield check_data_dir(settings.home)
    if settings.database_url:
        yield check_memory_server(settings.database_url)
    else:
        yield check_memory_db(settings.home / "memory.db")
        yield check_pending(settings.home / "pending")
    found = _confinement()
    yield check_bubblewrap(platform.system(), found.problem, found.describe())
    yield check_workspace_git(Path.cwd())


def _confinement() -> Confinement:
    from retinue.tools.builtin.sandbox import BWRAP_ENV, confinement

    return confinement(os.environ.get(BWRAP_ENV) or "bwrap")


def _local_checks(local: str | None, home: Path, extra: Check) -> Iterator[Check]:
    """The model file and a 1-token generation, for a ``local:`` main model."""
    from retinue.errors import RetinueError
    from retinue.llm._gguf import MODELS
    from retinue.llm.local import LocalModel
    from retinue.runtime import LOCAL_DEFAULT

    if local is None:
        why = f"not needed: the main model is not a local one (try --model {LOCAL_DEFAULT})"
        yield Check.skipped("model file", why)
        yield Check.skipped("1-token generation", why)
        return
    spec = MODELS.get(local)
    if spec is None and not local.endswith(".gguf"):
        known = ", ".join(MODELS)
        yield Check.failed(
            "model file",
            f"unknown local model {local!r} (known: {known}, or a path to a .gguf file)",
            "check --model, RETINUE_MODEL or model in config.toml",
        )
        return
    if spec is not None and extra.status != "ok":  # its parts come with the extra
        why = "needs the local extra (its fix is above)"
        yield Check.skipped("model file", why)
        yield Check.skipped("1-token generation", why)
        return
    file = check_model_file(spec, home) if spec else check_gguf_file(Path(local).expanduser())
    yield file
    if file.status != "ok" or extra.status != "ok":
        why = "needs the model file and the local extra (the fix is above)"
        yield Check.skipped("1-token generation", why)
        return
    try:
        worker = LocalModel(local, home=home).worker()
    except RetinueError as exc:
        yield Check.failed_with("1-token generation", str(exc))
        return
    yield check_generation(worker)


def _read_cpuinfo() -> str | None:
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


_MARKS = {
    "ok": "[green]✓[/]",
    "warning": "[yellow]![/]",
    "failed": "[red]✗[/]",
    "skipped": "[dim]–[/]",
}


def _guarded(found: Iterator[Check]) -> Iterator[Check]:
    """The checks; if one breaks unexpectedly, a failure line ends the report, not a traceback."""
    try:
        yield from found
    except Exception as exc:  # a bug in a check: say so in one line
        yield Check.failed(
            "doctor", f"a check broke: {type(exc).__name__}: {exc}", "please report this line"
        )


def doctor(
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="check this model (provider:model, a model id or an alias) instead",
        ),
    ] = None,
) -> None:
    """Check Python, the local model, CPU, providers, data and memory. Exit 0 when nothing
    failed (warnings, marked !, name optional parts missing), 1 when a check failed."""
    from retinue.cli.term import console as make_console
    from retinue.cli.term import escape

    console = make_console()  # emoji codes off: details quote paths and errors verbatim
    counts = {"failed": 0, "warning": 0}
    for check in _guarded(checks(model)):
        console.print(f"{_MARKS[check.status]} {escape(check.name)}: {escape(check.detail)}")
        if check.status in counts:
            counts[check.status] += 1
            console.print(f"    [yellow]fix:[/] {escape(check.fix)}")
    console.print(_summary(counts["failed"], counts["warning"]))
    raise typer.Exit(1 if counts["failed"] else 0)


def _summary(failed: int, warnings: int) -> str:
    also = f", {_plural(warnings, 'warning')}" if warnings else ""
    if failed:
        return f"[red]{_plural(failed, 'check')} failed[/]{also}"
    if warnings:
        return f"[yellow]no check failed, {_plural(warnings, 'warning')}[/]"
    return "[green]all checks passed[/]"
