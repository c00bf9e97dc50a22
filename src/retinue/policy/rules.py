"""Permission rules in Claude Code's syntax: ``Tool`` or ``Tool(specifier)``.

=============================== ==========================================================
rule                            matches
=============================== ==========================================================
``Bash``                        every command
``Bash(npm run build)``         exactly that command
``Bash(npm run test:*)``        a command starting with ``npm run test`` (``:*`` at the end)
``Bash(git * main)``            ``*`` matches any text
``Read(./secrets/**)``          a path, gitignore-style: ``./x``, ``x/y`` and ``/x`` from the
                                workspace (the project root), ``//x`` absolute, ``~/x`` from
                                home; a bare name (``*.env``) at any depth; ``*``, ``?``,
                                ``[…]``, ``**`` and ``{a,b}`` read as ``Glob`` reads them
                                (:mod:`retinue.tools.builtin.globs`). ``Read``
                                covers ``Glob``, ``Grep`` and ``LS`` too, and a search from
                                a parent folder leaves out the files a deny rule names
                                (:meth:`RuleSet.hiding`)
``Edit(src/**)``                the same paths, for ``Write``, ``Edit``, ``MultiEdit``,
                                ``NotebookEdit``
``WebFetch(domain:example.com)`` a URL on that host or one of its subdomains
``mcp__github`` / ``mcp__github__*`` every tool of the MCP server ``github``
``mcp__github__get_issue``      one MCP tool
``Agent(reviewer)``             delegating to the role ``reviewer`` (``Task(…)`` alike)
=============================== ==========================================================

The rule an "always" answer adds (:func:`rule_for`) is made from the call, not parsed: it
matches that call's exact command, file or host and nothing more (no folder, no command
prefix, no subdomain, and a ``*`` in the call is a plain character), so a person's "always"
never allows a call they did not see.

A path rule ignores case where the workspace's file system does (macOS, Windows; probed per
workspace, :mod:`retinue.policy.fscase`), since there ``Secrets/x`` and ``secrets/X`` are one
file.

Deny wins over ask, and ask over allow. A rule that cannot be parsed is reported (file and
line) and the others stay in force.

What a Bash rule can promise, and what it cannot. A command is parsed with a real bash parser
(:mod:`retinue.policy.shellwords`) and a Bash rule is matched against every simple command it
would start: each part of ``a && b``, ``a || b``, ``a; b``, ``a | b``; what runs inside ``$(…)``,
backticks, ``<(…)``, ``( … )``, a function's body, ``bash -c '…'``, ``eval '…'``; the command a
wrapper runs (``sudo``, ``env``, ``timeout``, ``nice``, ``xargs``, ``find -exec``, ``git -c
alias.x='!…'``…). The shell's quoting is removed first (``r''m``, ``"r"m``, ``\\rm`` and
``$'\\x72m'`` are ``rm``), and a program's folder too (``/bin/rm`` matches ``Bash(rm:*)``). A deny
or ask rule applies when it matches any of them; allow rules allow a command only when they
match every one, and never one whose programs cannot all be known before it runs (a variable
or an expansion as the program, ``eval "$x"``, ``source``, an alias, ``python3 -c``, ``perl -e``,
``curl … | sh``, a setting such as ``PAGER=``…). While any Bash deny or ask rule exists, such a
command asks, saying what could not be known (it is not auto-allowed for running sandboxed), as
does one whose argument known only at run time could make a deny or ask rule match (``git push
$F`` under ``Bash(git push --force:*)``); with none, nothing changes. What no rule can promise:
it matches the programs a command starts as written, not what they do once they run.
``python3 x.py``, ``bash x.sh``, ``make`` or ``npm test`` may delete files or reach the network,
and ``Bash(rm:*)`` says nothing about them; ``Bash(curl:*)`` does not stop ``wget``. The sandbox
(what is writable, what is hidden, whether the network is reachable) is the boundary; command
rules decide what is asked.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from retinue.policy.fscase import ignores_case
from retinue.policy.modes import EDIT_TOOLS, Decision
from retinue.policy.shellwords import CommandLine, Simple, analyse
from retinue.tools.builtin.globs import escape as glob_escape
from retinue.tools.builtin.globs import glob_regex

__all__ = ["Rule", "RuleSet", "parse_rule", "rule_for", "rule_names"]

_RULE = re.compile(r"^([A-Za-z_][\w\-]*(?:__\*)?)(?:\((.*)\))?$", re.DOTALL)
_READ_FAMILY = frozenset({"Read", "Glob", "Grep", "LS", "NotebookRead"})
_PATH_ARGS = ("file_path", "path", "notebook_path")
_ALIASES = {"Task": "Agent", "SubAgent": "Agent", "MultiEdit": "Edit", "Write": "Edit"}
MAX_SPEC = 2_000  # characters of one rule's specifier


@dataclass(frozen=True, slots=True)
class Rule:
    """One parsed rule: the tool it names and how its specifier matches a call."""

    text: str
    tool: str  # as written, ``Task`` → ``Agent``
    spec: str | None  # None: every call of the tool
    _regex: re.Pattern[str] | None = field(default=None, compare=False)  # (WebFetch: the host
    # of a rule made from one call, matched exactly; a written one's domain takes subdomains)
    _lead: tuple[str, ...] = field(default=(), compare=False)  # Bash: the words before any *
    _open: bool = field(default=False, compare=False)  # Bash: a plain prefix (``npm test:*``)

    def matches(
        self,
        tool: str,
        args: Mapping[str, Any],
        workspace: Path,
        *,
        every: bool = False,
        resolved: dict[str, str] | None = None,
    ) -> bool:
        """Whether the rule covers the call; for a path, ``every``: both as written and as it
        resolves (through symlinks) must match (an allow rule), else either (deny, ask).
        ``resolved``: paths resolved so far for this one call (never kept longer: a link may
        change between calls)."""
        if not rule_names(self.tool, tool):
            return False
        if self.spec is None or self.spec in ("*", ""):
            return True
        if self.tool == "Bash":
            return self.covers(analyse(str(args.get("command", ""))))
        if self.tool == "WebFetch":
            url = str(args.get("url", ""))
            if self._regex is not None:
                return self._regex.fullmatch(_url_host(url)) is not None
            return _on_domain(url, self.spec.removeprefix("domain:"))
        if self.tool == "Agent":
            return str(args.get("role", "")) == self.spec
        if self.tool in EDIT_TOOLS or self.tool == "Edit" or self.tool in _READ_FAMILY:
            return self._path(args, workspace, every, {} if resolved is None else resolved)
        return False

    def covers(self, line: CommandLine) -> bool:
        """Whether this Bash rule matches any command ``line`` runs (a deny or ask rule)."""
        if self.spec is None:
            return True
        return any(self._command(s) for c in line.commands for s in _spellings(c))

    def may_match(self, command: Simple) -> bool:
        """Whether this Bash rule could match ``command`` once its words known only at run time
        are (``git push $F`` for ``Bash(git push --force:*)``)."""
        if self.spec is None or command.known >= len(command.words):
            return False
        lead, words = self._lead, command.words
        for i in range(min(command.known, len(lead))):
            if words[i] != lead[i] and not (i == 0 and command.program == lead[0]):
                return False
        return command.known < len(lead) or not self._open

    def _command(self, command: str) -> bool:
        assert self.spec is not None and self._regex is not None
        return self._regex.fullmatch(command.strip()) is not None

    def _path(
        self, args: Mapping[str, Any], workspace: Path, every: bool, resolved: dict[str, str]
    ) -> bool:
        raw = next((args[k] for k in _PATH_ARGS if isinstance(args.get(k), str)), None)
        target = _absolute(raw or ".", workspace)
        real = resolved.get(target)
        if real is None:
            real = resolved[target] = _resolved(target, workspace)
        regex = self._regex
        assert regex is not None
        hits = (
            any(regex.fullmatch(p) for p in (t, t + "/")) for t in dict.fromkeys((target, real))
        )
        return all(hits) if every else any(hits)


def _flagged(regex: re.Pattern[str]) -> str:
    """The pattern's text, with ``(?i:…)`` when it ignores case (the text alone would not)."""
    return f"(?i:{regex.pattern})" if regex.flags & re.IGNORECASE else regex.pattern


def rule_names(rule_tool: str, tool: str) -> bool:
    """Whether a rule written for ``rule_tool`` can apply to a call of ``tool``."""
    if rule_tool.startswith("mcp__"):
        server_wide = rule_tool.removesuffix("__*")
        if server_wide.count("__") == 1:  # mcp__server or mcp__server__*
            return tool.startswith(server_wide + "__")
        return tool == rule_tool
    if rule_tool == "Read":
        return tool in _READ_FAMILY
    if rule_tool == "Edit":
        return tool in EDIT_TOOLS
    return _ALIASES.get(tool, tool) == _ALIASES.get(rule_tool, rule_tool)


def _spellings(command: Simple) -> tuple[str, ...]:
    """What a deny or ask rule is matched against: the words as the program gets them, with
    the program's folder and without, its name in lower case too (``RM`` runs ``rm`` where
    the file system ignores case), and the command as written."""
    joined = " ".join(command.words)
    named = " ".join((command.program, *command.words[1:]))
    lower = " ".join((command.program.lower(), *command.words[1:]))
    return tuple(dict.fromkeys((joined, named, lower, command.written)))


def _allow_spellings(command: Simple) -> tuple[str, ...]:
    """What an allow rule is matched against: the command as written, or its words with its
    ``NAME=value`` settings (a setting is part of what is allowed)."""
    return tuple(dict.fromkeys((" ".join((*command.settings, *command.words)), command.written)))


def _on_domain(url: str, domain: str) -> bool:
    host = _url_host(url)
    domain = _host_key(domain.strip())
    return bool(domain and host) and (host == domain or host.endswith("." + domain))


def _url_host(url: str) -> str:
    """The host ``url`` reaches, as :func:`_host_key` spells it ("" for none)."""
    try:
        return _host_key(urlsplit(url).hostname or "")
    except ValueError:
        return ""


def _host_key(host: str) -> str:
    """A host name as the fetch will reach it: lower case, in its ASCII (IDNA) spelling, with
    the dots other scripts write (``。``) read as dots, no trailing dot."""
    host = host.lower().rstrip(".")
    with contextlib.suppress(UnicodeError):  # (a name no fetch could reach: kept as it is)
        host = host.encode("idna").decode("ascii")
    return host.lower().rstrip(".")


def _resolved(target: str, workspace: Path) -> str:
    """``target`` through its symlinks; inside the workspace, spelt from ``workspace`` as
    written (which may itself be a link, as ``/tmp`` is on macOS)."""
    try:
        real, root = os.path.realpath(target), os.path.realpath(workspace)
    except (ValueError, OSError):  # a NUL in it: no tool can open it
        return target
    if real == root or real.startswith(root + os.sep):
        return os.path.normpath(os.path.join(workspace, os.path.relpath(real, root)))
    return real


def _absolute(path: str, workspace: Path) -> str:
    p = os.path.expanduser(path) if path.startswith("~") else path
    return os.path.normpath(os.path.join(workspace, p))


def _path_regex(spec: str, workspace: Path, ignore_case: bool) -> re.Pattern[str]:
    """The rule's pattern over absolute paths, in the one glob dialect of
    :mod:`retinue.tools.builtin.globs`; where it is anchored (workspace, home, ``/``) is
    plain text, so a ``[`` or ``*`` in the workspace's own path is no pattern."""
    if spec.startswith("//"):
        anchored = spec[1:]
    elif spec.startswith("~/"):
        anchored = os.path.join(glob_escape(os.path.expanduser("~")), spec[2:])
    elif spec.startswith("/"):
        anchored = os.path.join(glob_escape(str(workspace)), spec[1:])
    elif "/" in spec.rstrip("/").removeprefix("./") or spec.startswith("./"):
        anchored = os.path.join(glob_escape(str(workspace)), spec)
    else:  # a bare name: at any depth below the workspace, as in .gitignore
        anchored = os.path.join(glob_escape(str(workspace)), "**", spec)
    anchored = os.path.normpath(anchored)
    flags = re.IGNORECASE if ignore_case else 0
    if not anchored.endswith("**"):
        return re.compile(glob_regex(anchored) + "(?:/(?s:.*))?", flags)  # (and what is inside)
    return re.compile(glob_regex(anchored), flags)


def _command_regex(spec: str) -> re.Pattern[str]:
    if spec.endswith(":*"):
        return re.compile(_spaced(spec[:-2].strip()) + r"(?:\s.*)?", re.DOTALL)
    pieces = [_spaced(piece) for piece in spec.strip().split("*")]
    return re.compile(".*".join(pieces), re.DOTALL)


def _spaced(text: str) -> str:
    """``text`` as a regex in which each run of spaces matches any run of spaces."""
    return r"\s+".join(re.escape(piece) for piece in re.split(r"\s+", text))


def _lead(spec: str) -> tuple[str, ...]:
    """A Bash rule's words before its first ``*`` (the program, its subcommand…)."""
    words = []
    for word in spec.removesuffix(":*").split():
        if "*" in word:
            break
        words.append(word)
    return tuple(words)


def parse_rule(text: str, workspace: Path, *, ignore_case: bool | None = None) -> Rule:
    """One rule, or ``ValueError`` saying what is wrong with it. A path rule ignores case
    where the workspace's file system does (``ignore_case``; None: probed, see
    :mod:`retinue.policy.fscase`)."""
    if not isinstance(text, str):
        raise ValueError(f"a rule is a string, not {type(text).__name__}")
    text = text.strip()
    m = _RULE.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not Tool or Tool(specifier)")
    tool, spec = m.group(1), m.group(2)
    tool = "Agent" if tool == "Task" else tool
    if spec is None or spec.strip() in ("", "*"):
        return Rule(text, tool, None)
    if len(spec) > MAX_SPEC:
        raise ValueError(f"{text[:40]!r}…: the specifier is longer than {MAX_SPEC} characters")
    spec = spec.strip()
    if tool == "Bash":
        if ":*" in spec[:-2]:
            raise ValueError(f"{text!r}: ':*' may stand only at the end")
        is_open = spec.endswith(":*") and "*" not in spec[:-2]
        return Rule(text, tool, spec, _command_regex(spec), _lead(spec), is_open)
    if tool == "WebFetch":
        if not spec.startswith("domain:") or not spec.removeprefix("domain:").strip():
            raise ValueError(f"{text!r}: WebFetch takes domain:<host>")
        return Rule(text, tool, spec)
    if tool == "Agent":
        return Rule(text, tool, spec)
    if tool == "Read" or tool in EDIT_TOOLS or tool in _READ_FAMILY:
        fold = ignores_case(workspace) if ignore_case is None else ignore_case
        return Rule(text, tool, spec, _path_regex(spec, workspace, fold))
    if tool.startswith("mcp__"):
        raise ValueError(f"{text!r}: MCP rules take no specifier (mcp__server__tool)")
    raise ValueError(f"{text!r}: {tool} takes no specifier")


def rule_for(tool: str, args: Mapping[str, Any], workspace: Path) -> Rule | None:
    """The rule an "always" answer adds for this call: it matches this call's command, file
    or host exactly, never a folder, a command prefix or a host's subdomains. None where no
    rule can be that narrow (a compound command, a call without its path): "always" then
    allows this call only. A tool whose rules take no specifier (an MCP tool, ``WebSearch``,
    a program's own) gets its name, shown as such to the person asked."""
    if tool == "Bash":
        return _exact_command(str(args.get("command", "")))
    if tool in EDIT_TOOLS or tool in _READ_FAMILY:
        return _exact_path("Edit" if tool in EDIT_TOOLS else "Read", args, workspace)
    if tool == "WebFetch":
        host = _url_host(str(args.get("url", "")))
        if not host:
            return None
        return Rule(f"WebFetch(domain:{host})", tool, f"domain:{host}", re.compile(re.escape(host)))
    if tool in ("SubAgent", "Agent", "Task"):
        role = args.get("role")
        exact = isinstance(role, str) and role not in ("", "*")
        return Rule(f"Agent({role})", "Agent", role) if exact else None
    named = _RULE.fullmatch(tool) is not None and not tool.endswith("__*")
    if not named or (tool.startswith("mcp__") and tool.count("__") < 2):
        return None  # (a name that would read as a whole MCP server's, or not parse)
    return Rule(tool, tool, None)


def _exact_command(command: str) -> Rule | None:
    """``Bash(command)`` matching that one simple command only (its ``*`` a character)."""
    line = analyse(command)
    if len(line.commands) != 1 or line.unknown:
        return None  # (the rules allow a compound command part by part; never an unknown one)
    written = line.commands[0].written
    if written != command.strip() or written == "*":
        return None
    return Rule(f"Bash({written})", "Bash", written, re.compile(re.escape(written)))


def _exact_path(family: str, args: Mapping[str, Any], workspace: Path) -> Rule | None:
    """``Edit(./path)`` (or ``Read``) matching that one file (or folder) only."""
    raw = next((args[k] for k in _PATH_ARGS if isinstance(args.get(k), str)), None)
    if not raw or "\0" in raw:
        return None
    target = _absolute(raw, workspace)
    rel = os.path.relpath(target, workspace)
    if rel == os.curdir:
        spec = "./"
    elif rel == os.pardir or rel.startswith(os.pardir + os.sep):
        spec = "/" + target  # (//absolute)
    else:
        spec = "./" + rel
    flags = re.IGNORECASE if ignores_case(workspace) else 0
    return Rule(f"{family}({spec})", family, spec, re.compile(re.escape(target), flags))


@dataclass(slots=True)
class RuleSet:
    """Allow, ask and deny rules, with the problems found reading them."""

    allow: list[Rule] = field(default_factory=list)
    ask: list[Rule] = field(default_factory=list)
    deny: list[Rule] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    _index: dict[str, tuple[list[Rule], list[Rule], list[Rule]]] = field(
        default_factory=dict, repr=False, compare=False
    )  # per tool name: the deny, ask and allow rules that can apply to it

    def __bool__(self) -> bool:
        return bool(self.allow or self.ask or self.deny)

    def add(
        self,
        decision: Decision,
        texts: Iterable[object],
        workspace: Path,
        *,
        where: str = "",
        line_of: Mapping[str, int] | None = None,
    ) -> None:
        bucket = getattr(self, decision)
        self._index.clear()
        for text in texts:
            try:
                bucket.append(parse_rule(text, workspace))  # type: ignore[arg-type]
            except ValueError as exc:
                line = (line_of or {}).get(text) if isinstance(text, str) else None
                at = f"{where}:{line}" if where and line else where
                self.problems.append(f"{at}: permissions.{decision}: {exc}" if at else str(exc))

    def allow_rule(self, rule: Rule) -> None:
        """Add one parsed allow rule (an "always" answer)."""
        self.allow.append(rule)
        self._index.clear()

    def extend(self, other: RuleSet) -> None:
        self._index.clear()
        self.allow += other.allow
        self.ask += other.ask
        self.deny += other.deny
        self.problems += other.problems

    def match(
        self, tool: str, args: Mapping[str, Any], workspace: Path
    ) -> tuple[Decision, str] | None:
        deny, ask, allow = self._for(tool)
        resolved: dict[str, str] = {}  # (this call's paths through their links, once)
        for rule in deny:
            if rule.matches(tool, args, workspace, resolved=resolved):
                return "deny", rule.text
        for rule in ask:
            if rule.matches(tool, args, workspace, resolved=resolved):
                return "ask", rule.text
        if tool == "Bash":
            return _decide_command(deny, ask, allow, analyse(str(args.get("command", ""))))
        for rule in allow:
            if rule.matches(tool, args, workspace, every=True, resolved=resolved):
                return "allow", rule.text
        return None

    def hiding(self, tool: str, args: Mapping[str, Any], workspace: Path) -> tuple[str, ...]:
        """The path patterns a search by ``tool`` (``Grep``, ``Glob``) must leave out below
        its path: every deny rule's for it, and every ask rule's the call itself did not
        match (nobody was asked about what the search finds there)."""
        deny, ask, _ = self._for(tool)
        found = [r._regex for r in deny if r._regex is not None]
        found += [
            r._regex for r in ask if r._regex is not None and not r.matches(tool, args, workspace)
        ]
        return tuple(dict.fromkeys(_flagged(rx) for rx in found))

    def _for(self, tool: str) -> tuple[list[Rule], list[Rule], list[Rule]]:
        found = self._index.get(tool)
        if found is None:
            if len(self._index) >= 1_000:  # tool names a model made up, say
                self._index.clear()
            found = self._index[tool] = tuple(  # type: ignore[assignment]
                [r for r in rules if rule_names(r.tool, tool)]
                for rules in (self.deny, self.ask, self.allow)
            )
        return found  # type: ignore[return-value]


def _decide_command(
    deny: list[Rule], ask: list[Rule], allow: list[Rule], line: CommandLine
) -> tuple[Decision, str] | None:
    """Deny or ask where a rule matches any command ``line`` runs; ask where one cannot be
    checked against it; allow where allow rules cover every command and all are known."""
    for decision, rules in (("deny", deny), ("ask", ask)):
        for rule in rules:
            if rule.tool == "Bash" and rule.covers(line):
                return decision, rule.text  # type: ignore[return-value]
    guards = [r for r in (*deny, *ask) if r.tool == "Bash"]
    if guards:
        names = ", ".join(r.text for r in guards[:2]) + (", …" if len(guards) > 2 else "")
        if line.unknown:
            return "ask", f"{line.unknown[0]}; the Bash rules ({names}) cannot be checked"
        for command in line.commands:
            rule = next((r for r in guards if r.may_match(command)), None)
            if rule is not None:
                unknown = command.words[command.known]
                return "ask", f"{rule.text} may match once {unknown} is known"
    return _allows_command(allow, line)


def _allows_command(allow: list[Rule], line: CommandLine) -> tuple[Decision, str] | None:
    """Allowed when allow rules cover every command ``line`` runs, and all are known."""
    rules = [r for r in allow if r.tool == "Bash"]
    whole = next((r for r in rules if r.spec in (None, "*", "")), None)
    if whole is not None:
        return "allow", whole.text
    if line.unknown or not rules or not line.commands:
        return None
    first = ""
    for command in line.commands:
        spellings = _allow_spellings(command)
        rule = next((r for r in rules if any(r._command(s) for s in spellings)), None)
        if rule is None:
            return None
        first = first or rule.text
    return "allow", first
