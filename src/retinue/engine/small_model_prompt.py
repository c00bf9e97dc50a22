"""A prompt written for small models (the embedded 0.5B one): fewer tools, less to choose.

A small model chooses tools badly but reads well. So for a model whose profile says
``small_model_prompt`` (see :class:`~retinue.llm.profiles.ModelProfile`), the main agent gets:

* a short system prompt that already lists the workspace's files and the roles it can
  delegate to, so "what files are here" needs no tool;
* only the tools ordinary work needs (no memory tools, see :data:`SMALL_MODEL_OMITS`);
* a ``role`` parameter (SubAgent, UnloadSubAgent) that lists the roles as its only choices,
  so a constrained small model cannot name a role that does not exist;
* the current content of small workspace files that the user's message names, appended to
  that message, so "what is X in settings.py" needs no tool either.

Everything read here stays inside the workspace root and is bounded in size. (This is not
*compaction*, Claude Code's word for what Retinue calls compressing a history:
:mod:`retinue.engine.compress`. The module's old name, ``retinue.engine.compact``, is a
deprecated alias for one release.)
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from retinue.llm.base import ToolSpec
from retinue.tools.base import Tool, ToolRegistry

__all__ = [
    "SMALL_MODEL_OMITS",
    "small_model_main_prompt",
    "with_named_files",
    "with_role_choices",
    "workspace_overview",
]

SMALL_MODEL_OMITS = frozenset(
    {
        "SubAgentStatus",
        "FindRole",
        "AskParent",
        "LS",
        "MultiEdit",
        "TodoWrite",
        "WebFetch",
        "WebSearch",
        "SendMessage",
        "TaskCreate",
        "TaskList",
        "TaskGet",
        "TaskUpdate",
        "TeamCreate",
        "TeamDelete",
    }
)
"""Tools the main agent of a small model does without (memory tools are not offered at all);
it keeps Read, Write, Edit, Glob, Grep, Bash, SubAgent, UnloadSubAgent, Skill (when skills
are installed) and any tool of the caller's own."""

MAX_LISTED = 40
MAX_ROLES = 20
MAX_INLINE_BYTES = 4_000
MAX_INLINE_FILES = 3

_PROMPT = """\
You are Retinue, a coding assistant. You work in the folder {workspace}.
{overview}
Answer directly, in plain sentences, when you can. Use a tool only to read, change or run \
something you cannot see above: Write or Edit to change files, Bash to run commands, \
SubAgent to hand a task to one of these roles:
{roles}{skills}
Paths outside the folder are not allowed."""
MAX_SKILL_NAMES = 15

_NAMED = re.compile(r"(?<![\w./-])([\w.-]+(?:/[\w.-]+)*\.[A-Za-z0-9]{1,8})(?![\w/-])")


def workspace_overview(workspace: Path, limit: int = MAX_LISTED) -> str:
    """One line naming the workspace's top-level entries (folders end with ``/``)."""
    try:
        with os.scandir(workspace) as entries:
            names = sorted(
                e.name + ("/" if e.is_dir(follow_symlinks=False) else "")
                for e in entries
                if not e.name.startswith(".")
            )
    except OSError:
        return "The folder cannot be listed."
    if not names:
        return "The folder is empty."
    shown = names[:limit]
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return f"Files in the folder: {', '.join(shown)}{more}."


def small_model_main_prompt(
    workspace: Path, roles: Iterable[tuple[str, str]], skills: Sequence[str] = ()
) -> str:
    """The main agent's prompt for a small model; ``skills`` are named only (``Skill(name)``
    loads one)."""
    listed = list(roles)
    lines = [f"- {name}: {_first_sentence(text)}" for name, text in listed[:MAX_ROLES]]
    if len(listed) > MAX_ROLES:
        lines.append(f"- and {len(listed) - MAX_ROLES} more roles")
    return _PROMPT.format(
        workspace=workspace,
        overview=workspace_overview(workspace),
        roles="\n".join(lines) or "(none)",
        skills=_skills_line(skills),
    )


def _skills_line(skills: Sequence[str]) -> str:
    if not skills:
        return ""
    shown = ", ".join(skills[:MAX_SKILL_NAMES])
    more = f" and {len(skills) - MAX_SKILL_NAMES} more" if len(skills) > MAX_SKILL_NAMES else ""
    return f"\nSkill(name) loads the instructions of a skill: {shown}{more}."


def with_role_choices(tools: ToolRegistry, roles: Sequence[str]) -> ToolRegistry:
    """``tools`` where every string ``role`` parameter may only be one of ``roles``."""
    if not roles:
        return tools
    return ToolRegistry(
        [_narrowed(t, roles) for name in tools.names if (t := tools.get(name)) is not None]
    )


def _narrowed(tool: Tool, roles: Sequence[str]) -> Tool:
    spec = tool.spec
    role = spec.parameters.get("properties", {}).get("role")
    if not isinstance(role, dict) or role.get("type") != "string":
        return tool
    parameters = copy.deepcopy(spec.parameters)
    parameters["properties"]["role"]["enum"] = list(roles)
    return replace(tool, _spec=ToolSpec(spec.name, spec.description, parameters))


def with_named_files(
    text: str,
    workspace: Path,
    *,
    max_bytes: int = MAX_INLINE_BYTES,
    max_files: int = MAX_INLINE_FILES,
) -> str:
    """``text`` followed by the content of the small workspace files it names."""
    root = workspace.resolve()
    blocks: list[str] = []
    seen: set[Path] = set()
    for match in _NAMED.finditer(text):
        path = _inside(root, match.group(1))
        if path is None or path in seen:
            continue
        seen.add(path)
        content = _small_text(path, max_bytes)
        if content is not None:
            rel = path.relative_to(root).as_posix()
            blocks.append(f"Current content of {rel}:\n```\n{content.rstrip()}\n```")
        if len(blocks) >= max_files:
            break
    return text if not blocks else text + "\n\n" + "\n\n".join(blocks)


def _inside(root: Path, name: str) -> Path | None:
    candidate = (root / name).resolve()
    if candidate == root or not candidate.is_relative_to(root) or not candidate.is_file():
        return None
    return candidate


def _small_text(path: Path, max_bytes: int) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _first_sentence(text: str, limit: int = 100) -> str:
    first = re.split(r"(?<=[.!?])\s|\n", text.strip(), maxsplit=1)[0]
    return first if len(first) <= limit else first[: limit - 1] + "…"
