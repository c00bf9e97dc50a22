"""What a shell command line runs: every simple command bash would start, found by a parser.

The Bash permission rules (:mod:`retinue.policy.rules`) are matched against what
:func:`analyse` finds, not against the text. The command is parsed with tree-sitter-bash and
walked whole, so a rule for ``rm`` sees the ``rm`` in ``a && rm f``, ``a | rm f``, ``(rm f)``,
``$(rm f)``, backticks, ``<(rm f)``, a heredoc, a function's body, a loop or a test. Words are read
as bash reads them: quotes and backslashes removed (``r''m``, ``"r"m``, ``\\rm`` and
``$'\\x72m'`` all read ``rm``), leading ``NAME=value`` words set aside. It follows what runs
another command given as words or as text:

- shells and ``eval``: ``bash -c 'rm f'`` (``sh``, ``dash``, ``zsh``, ``ksh``…), ``eval 'rm f'``,
  ``trap 'rm f' EXIT``, ``su -c``, ``watch``: literal text is parsed in turn, at most
  :data:`MAX_NESTING` deep;
- wrappers, with their options read as each documents them: ``sudo``, ``doas``, ``env``,
  ``timeout``, ``nice``, ``nohup``, ``xargs``, ``command``, ``builtin``, ``exec``, ``time``,
  ``stdbuf``, ``setsid``, ``ionice``, ``chroot``, ``taskset``, ``strace``, ``coproc``,
  ``busybox``, ``uv run``…;
- ``find … -exec rm {} ;`` (``-execdir``, ``-ok``, ``-okdir``); ``find … -delete`` reads as
  ``rm -rf`` of its starting points;
- ``git -c alias.x='!rm f' x``: a shell alias's text is parsed.

What cannot be known before the command runs is reported, one reason each
(:attr:`CommandLine.unknown`): a program named by an expansion or a pattern (``$X f``,
``rm${IFS}f``, ``/bin/r?``); ``eval``/``bash -c`` of text that is not literal; ``source`` and
``.`` (a file's commands), ``alias`` (it changes what later names mean); code given inline to an
interpreter (``python3 -c``, ``perl -e``, ``node -e``, ``ruby -e``, ``php -r``, an ``awk``
program that calls ``system`` or a pipe, ``sed``'s ``e``) or read from its input (``curl … |
sh``, ``python3 <<EOF``); a setting that names a program (``PATH=``, ``PAGER=``,
``GIT_SSH_COMMAND=``, ``LD_PRELOAD=``, ``BASH_ENV=``…, also through ``export`` and ``env``), a git
setting that does (``-c core.pager=…``); a wrapper option this module does not know; bash's own
network redirections (``/dev/tcp/…``); text the parser cannot read whole (bash may read it
otherwise); and a command longer than :data:`MAX_LENGTH` characters, nested deeper than
:data:`MAX_NESTING` or with more than :data:`MAX_COMMANDS` commands.

No parser sees what a program does once it runs: ``python3 x.py``, ``bash x.sh``, ``make`` or
``npm test`` may delete files or reach the network, and nothing here says so. The sandbox, not the
rules, bounds that.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import tree_sitter
import tree_sitter_bash

__all__ = ["MAX_COMMANDS", "MAX_LENGTH", "MAX_NESTING", "CommandLine", "Simple", "analyse"]

MAX_LENGTH = 20_000  # characters of one command line (text given to bash -c counts again)
MAX_NESTING = 4  # bash -c inside bash -c (eval, trap…) inside …
MAX_COMMANDS = 500  # simple commands in one command line, all levels together
MAX_NODES = 100_000  # syntax nodes walked, all levels together
MAX_KEPT = 200_000  # characters of the commands kept, all together (nested text repeats)

_LANGUAGE = tree_sitter.Language(tree_sitter_bash.language())


@dataclass(frozen=True, slots=True)
class Simple:
    """One command the shell would start: its words as the program will get them."""

    words: tuple[str, ...]  # quotes removed; a word known only when it runs, as written
    known: int  # how many leading words are known before it runs (at least the program)
    written: str  # as written (assignments, redirections), or its words when found inside one
    settings: tuple[str, ...] = ()  # the NAME=value words before it, as written

    @property
    def program(self) -> str:
        """The program's name without its folder (``/bin/rm`` → ``rm``)."""
        return _base(self.words[0])


@dataclass(frozen=True, slots=True)
class CommandLine:
    """Every simple command found, and why some of what runs cannot be known."""

    commands: tuple[Simple, ...]
    unknown: tuple[str, ...]


@functools.lru_cache(maxsize=128)
def analyse(command: str) -> CommandLine:
    """The simple commands ``command`` runs (as far as they can be known before it runs)."""
    reader = _Reader()
    reader.source(command, 0)
    return CommandLine(tuple(reader.commands), tuple(dict.fromkeys(reader.unknown)))


Node = tree_sitter.Node
_Word = tuple[str, bool]  # a word's value (or its text, when not known) and whether known


class _Reader:
    """One command line's walk: what it found, and its budget (shared by every level)."""

    def __init__(self) -> None:
        self.commands: list[Simple] = []
        self.unknown: list[str] = []
        self.nodes = 0
        self.kept = 0

    def doubt(self, why: str) -> None:
        if len(self.unknown) < 20:
            self.unknown.append(why)

    def source(self, text: str, depth: int) -> None:
        """Parse ``text`` as bash and take every command in it."""
        if depth > MAX_NESTING:
            self.doubt(f"commands nested more than {MAX_NESTING} deep ({_show(text)})")
            return
        if len(text) > MAX_LENGTH:
            self.doubt(f"a command longer than {MAX_LENGTH} characters")
            return
        data = text.encode("utf-8", "surrogatepass")
        root = tree_sitter.Parser(_LANGUAGE).parse(data).root_node
        if root.has_error:
            self.doubt(f"bash may read {_show(text)} otherwise than the parser does")
        stack = [root]
        while stack:
            node = stack.pop()
            self.nodes += 1
            if self.over():
                return
            kind = node.type
            if kind == "command":
                self.simple(node, depth)
            elif kind == "variable_assignment":
                self.setting(_text(node))
            elif kind == "file_redirect":
                self.redirect(node)
            elif node.child_count == 0 and node.is_named and kind not in _LITERAL:
                self.unread(node)
            stack.extend(reversed(node.children))

    def unread(self, node: Node) -> None:
        """A piece of text the parser left as text where bash may still find a command
        (backticks inside ``${…}``, a ``<<-`` heredoc): unknown, unless quoted."""
        if not _HIDDEN.search(_ESCAPED.sub("", _text(node))):
            return
        redirect = node.parent if node.type == "heredoc_body" else None
        if redirect is not None and redirect.type == "heredoc_body":
            redirect = redirect.parent
        if redirect is not None:
            start = next((c for c in redirect.children if c.type == "heredoc_start"), None)
            if start is not None and re.search(r"['\"\\]", _text(start)):
                return  # (<<'EOF': the body is text)
        self.doubt(f"bash may run a command in {_show(_text(node))} that was not read")

    def over(self) -> bool:
        """Whether the walk has reached its bounds (then what it did not see is unknown)."""
        if self.nodes > MAX_NODES or len(self.commands) > MAX_COMMANDS or self.kept > MAX_KEPT:
            self.doubt(f"a command with more than {MAX_COMMANDS} parts, or too long to read")
            return True
        return False

    def simple(self, node: Node, depth: int) -> None:
        name = node.child_by_field_name("name")
        if name is None:
            return  # (only assignments or redirections)
        settings = tuple(_text(c) for c in node.children if c.type == "variable_assignment")
        parts = [c for c in node.children if c.is_named and c.type not in _NOT_WORDS]
        parent = node.parent
        written = node
        if parent is not None and parent.type == "redirected_statement":
            written = parent
            for redirect in parent.children:  # bash's words after a redirection: arguments
                if redirect.type == "file_redirect":
                    parts += [c for c in redirect.named_children if c.type != "file_descriptor"][1:]
        words = [_word(p) for p in parts]
        if not words[0][1] or _PATTERN.search(_text(name)):
            self.doubt(f"{_show(_text(name))} names the program only when it runs")
            return
        self.run(words, _text(written), depth, settings)

    def setting(self, assignment: str) -> None:
        """``NAME=value``: a setting that names a program makes what runs unknown."""
        name = assignment.split("=", 1)[0].split("[", 1)[0].removesuffix("+")
        if name in _PROGRAM_SETTINGS or name.startswith(("GIT_CONFIG_", "BASH_FUNC_")):
            self.doubt(f"{_show(assignment)} sets what other programs run")

    def redirect(self, node: Node) -> None:
        target = next((c for c in node.named_children if c.type != "file_descriptor"), None)
        if target is not None and _word(target)[0].startswith(("/dev/tcp/", "/dev/udp/")):
            self.doubt(f"{_show(_text(node))} opens a network connection in bash itself")

    def run(
        self, words: Sequence[_Word], written: str, depth: int, settings: tuple[str, ...] = ()
    ) -> None:
        """Record one command and follow what it runs in turn."""
        known = next((i for i, (_, ok) in enumerate(words) if not ok), len(words))
        self.kept += len(written) + sum(len(w) + 1 for w, _ in words)
        if self.over():
            return
        self.commands.append(Simple(tuple(w for w, _ in words), known, written, settings))
        program = _base(words[0][0])
        if program in _WRAPPERS:
            self.wrapped(program, words, depth)
        elif program in _FOLLOW:
            _FOLLOW[program](self, words, depth)
        elif program in _SHELLS:
            self.shell(words, depth)
        elif program in _OTHER_SHELLS:
            self.doubt(f"{program} commands cannot be read as bash")
        else:
            self.inspect(program, words)

    def nested(self, word: _Word, depth: int, what: str) -> None:
        """Parse the text a command runs as a command (when it is known)."""
        if word[1]:
            self.source(word[0], depth + 1)
        else:
            self.doubt(f"{what} runs {_show(word[0])}, known only when it runs")

    def wrapped(self, program: str, words: Sequence[_Word], depth: int) -> None:
        """A wrapper: the command it runs starts after its options."""
        spec = _WRAPPERS[program]
        start = _after_options(spec, [w for w, _ in words[1:]])
        if start is None:  # (command -v rm: it only says what rm is)
            return
        if isinstance(start, str):
            self.doubt(f"{program}: {start}")
            return
        start += 1 + spec.operands
        while spec.settings and start < len(words) and _ASSIGNMENT.match(words[start][0]):
            self.setting(words[start][0])
            start += 1
        if start >= len(words):
            return
        if not all(ok for _, ok in words[: start + 1]):
            self.doubt(f"what {program} runs is known only when it runs")
            return
        inner = words[start:]
        self.run(inner, " ".join(w for w, _ in inner), depth)

    def shell(self, words: Sequence[_Word], depth: int) -> None:
        """``bash -c TEXT``: TEXT is parsed; ``bash FILE`` runs a file (not seen)."""
        program, i, command = _base(words[0][0]), 1, False
        while i < len(words):
            word, ok = words[i]
            if not ok:
                self.doubt(f"{program}'s options are known only when it runs")
                return
            if word == "--" or word == "-":
                i += 1
                break
            if word in _SHELL_LONG_VALUES:
                i += 2
                continue
            if word.startswith("--"):
                i += 1
                continue
            if word[:1] not in "-+" or len(word) < 2:
                break
            letters = word[1:]
            if "i" in letters or "s" in letters:
                self.doubt(f"{program} {word} runs what it reads, or the user's aliases")
                return
            command = command or "c" in letters
            i += 1 + sum(letters.count(x) for x in "oO")
        if command:
            if i >= len(words):
                self.doubt(f"{program} -c without a command")
                return
            self.nested(words[i], depth, program)
        elif i >= len(words):
            self.doubt(f"{program} runs the commands it reads from its input")

    def inspect(self, program: str, words: Sequence[_Word]) -> None:
        """Programs that run code given inline, or read from their input."""
        args = [w for w, _ in words[1:]]
        interpreter = _interpreter(program)
        if interpreter is not None:
            why = _inline(interpreter, args)
            if why:
                self.doubt(f"{program} {why}")
            return
        if program in _AWKS:
            script = _awk_program(args)
            if script is not None and ("system" in script or "|" in script):
                self.doubt(f"{program}'s program runs other commands ({_show(script)})")
        elif program in ("sed", "gsed") and any(_SED_EXEC.search(a) for a in args):
            self.doubt(f"{program}'s script may run commands (its 'e')")
        elif program in _CALLBACKS and any(
            a.startswith("-") and set(a[1:]) & set(_CALLBACKS[program]) for a in args
        ):
            self.doubt(f"{program} runs text given to one of its options")


# -- what follows other commands -----------------------------------------------------------


def _eval(reader: _Reader, words: Sequence[_Word], depth: int) -> None:
    args = words[1:]
    if args:
        text = " ".join(w for w, _ in args)
        reader.nested((text, all(ok for _, ok in args)), depth, "eval")


def _trap(reader: _Reader, words: Sequence[_Word], depth: int) -> None:
    args = [w for w in words[1:] if not w[0].startswith("-")]
    if len(args) >= 2:  # (trap ACTION SIGNAL…; trap SIGNAL alone resets it)
        reader.nested(args[0], depth, "trap")


def _source(reader: _Reader, words: Sequence[_Word], depth: int) -> None:
    del depth
    name = words[1][0] if len(words) > 1 else ""
    reader.doubt(f"{_base(words[0][0])} {_show(name)} runs a file's commands, unseen")


def _alias(reader: _Reader, words: Sequence[_Word], depth: int) -> None:
    defined = [w for w in words[1:] if "=" in w[0]]
    if defined:
        reader.doubt("alias changes what later commands' names mean")
    for value, ok in defined:
        reader.nested((value.split("=", 1)[1], ok), depth, "alias")


def _su(reader: _Reader, words: Sequence[_Word], depth: int) -> None:
    args = list(words[1:])
    for i, (word, _) in enumerate(args):
        if word in ("-c", "--command", "--session-command") and i + 1 < len(args):
            reader.nested(args[i + 1], depth, "su")
            return
        if word.startswith(("--command=", "--session-command=")):
            reader.nested((word.split("=", 1)[1], args[i][1]), depth, "su")
            return
    reader.doubt(f"{_base(words[0][0])} without -c starts a shell that runs what it reads")


def _watch(reader: _Reader, words: Sequence[_Word], depth: int) -> None:
    spec = _Options(values="nq", flags="bcdegptwrhx", long_values=("--interval",))
    start = _after_options(spec, [w for w, _ in words[1:]])
    if start is None or isinstance(start, str):
        reader.doubt(f"watch: {start or 'an option not known here'}")
        return
    rest = words[1 + start :]
    if rest:
        reader.nested((" ".join(w for w, _ in rest), all(ok for _, ok in rest)), depth, "watch")


def _find(reader: _Reader, words: Sequence[_Word], depth: int) -> None:
    args = list(words[1:])
    starts = []
    for word, ok in args:
        if word.startswith(("-", "(", "!")):
            break
        starts.append((word, ok))
    i = 0
    while i < len(args):
        word = args[i][0]
        if word in ("-exec", "-execdir", "-ok", "-okdir"):
            end = next((j for j in range(i + 1, len(args)) if args[j][0] in (";", "+")), len(args))
            inner = args[i + 1 : end]
            if inner and inner[0][1]:
                reader.run(inner, " ".join(w for w, _ in inner), depth)
            elif inner:
                reader.doubt(f"what find {word} runs is known only when it runs")
            i = end
        elif word == "-delete":
            removed = [("rm", True), ("-rf", True), *(starts or [(".", True)])]
            reader.run(removed, " ".join(w for w, _ in removed), depth)
        i += 1


def _git(reader: _Reader, words: Sequence[_Word], depth: int) -> None:
    args = list(words[1:])
    i = 0
    while i < len(args) and args[i][0].startswith("-"):
        word, ok = args[i]
        if word in ("-c", "-C") and i + 1 < len(args):
            if word == "-c":
                _git_setting(reader, args[i + 1], depth)
            i += 2
            continue
        if word.startswith(("--config-env", "--exec-path=")) or word == "--exec-path":
            reader.doubt(f"git {_show(word)} changes what git runs")
        elif word.startswith("-c") and word != "-c":
            _git_setting(reader, (word[2:], ok), depth)
        i += 1


def _git_setting(reader: _Reader, setting: _Word, depth: int) -> None:
    text, ok = setting
    key, _, value = text.partition("=")
    key = key.lower()
    if not ok:
        reader.doubt("git -c with a setting known only when it runs")
    elif key.startswith("alias.") and value.startswith("!"):
        reader.nested((value[1:], True), depth, "a git alias")
    elif key.startswith(("alias.", "include", "pager.")) or key.rsplit(".", 1)[-1] in _GIT_PROGRAMS:
        reader.doubt(f"git -c {_show(text)} changes what git runs")


def _uv_run(reader: _Reader, words: Sequence[_Word], depth: int) -> None:
    """``uv run CMD`` (``poetry run``, ``pipenv run``, ``conda run``…) runs CMD."""
    if len(words) < 3 or words[1][0] not in ("run", "exec"):
        return
    if words[2][0].startswith("-") or not words[2][1]:
        reader.doubt(f"what {_base(words[0][0])} {words[1][0]} runs is not known")
        return
    reader.run(words[2:], " ".join(w for w, _ in words[2:]), depth)


_FOLLOW: dict[str, Callable[[_Reader, Sequence[_Word], int], None]] = {
    "eval": _eval, "trap": _trap, "source": _source, ".": _source, "alias": _alias,
    "su": _su, "runuser": _su, "watch": _watch, "find": _find, "git": _git,
    "uv": _uv_run, "poetry": _uv_run, "pipenv": _uv_run, "bundle": _uv_run,
}  # fmt: skip


# -- wrappers and their options ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Options:
    """How a wrapper reads its options, then the words before the command it runs."""

    values: str = ""  # short options that take a value (attached or the next word)
    flags: str = ""  # short options that take none
    optional: str = ""  # short options whose value, if any, is attached (xargs -i)
    long_values: tuple[str, ...] = ()
    long_flags: tuple[str, ...] = ()
    stops: str = ""  # options after which nothing runs (command -v)
    operands: int = 0  # words before the command (timeout's duration, chroot's folder)
    settings: bool = False  # NAME=value words before the command (env)


_DIGITS = "0123456789"
_WRAPPERS: dict[str, _Options] = {
    "sudo": _Options(values="ugCDhprtTU", flags="AbEHKkPSnBNRVv", settings=True,
                     stops="elvVK",
                     long_values=("--user", "--group", "--close-from", "--chdir", "--host",
                                  "--prompt", "--role", "--type", "--command-timeout",
                                  "--other-user"),
                     long_flags=("--askpass", "--background", "--preserve-env",
                                 "--set-home", "--non-interactive", "--stdin",
                                 "--reset-timestamp", "--remove-timestamp", "--bell")),
    "doas": _Options(values="uC", flags="ns"),
    "env": _Options(values="uC", flags="i0v", settings=True,
                    long_values=("--unset", "--chdir"),
                    long_flags=("--ignore-environment", "--null", "--debug", "-")),
    "timeout": _Options(values="sk", flags="v", operands=1,
                        long_values=("--signal", "--kill-after"),
                        long_flags=("--foreground", "--preserve-status", "--verbose")),
    "nice": _Options(values="n", flags=_DIGITS, long_values=("--adjustment",)),
    "nohup": _Options(),
    "command": _Options(flags="p", stops="vV"),
    "builtin": _Options(),
    "exec": _Options(values="a", flags="cl"),
    "time": _Options(values="fo", flags="pvaq",
                     long_values=("--format", "--output"),
                     long_flags=("--verbose", "--append", "--portability", "--quiet")),
    "stdbuf": _Options(values="ioe", long_values=("--input", "--output", "--error")),
    "setsid": _Options(flags="cfw", long_flags=("--ctty", "--fork", "--wait")),
    "ionice": _Options(values="cn", flags="t", stops="p",
                       long_values=("--class", "--classdata"), long_flags=("--ignore",)),
    "chroot": _Options(operands=1, long_values=("--userspec", "--groups"),
                       long_flags=("--skip-chdir",)),
    "taskset": _Options(flags="ac", stops="p", operands=1,
                        long_flags=("--all-tasks", "--cpu-list")),
    "strace": _Options(values="abeEIoOPsSuUX", flags="cCdDfFhikqrtTvVwxyYZ"),
    "ltrace": _Options(values="aeEnosuAlLx", flags="bcCdDfhiLrStTV"),
    "xargs": _Options(values="adEILnPs", flags="0rtpx", optional="eil",
                      long_values=("--arg-file", "--delimiter", "--eof", "--max-lines",
                                   "--max-args", "--max-procs", "--max-chars",
                                   "--process-slot-var"),
                      long_flags=("--null", "--no-run-if-empty", "--verbose",
                                  "--interactive", "--exit", "--open-tty", "--replace")),
    "coproc": _Options(),
    "unbuffer": _Options(),
    "busybox": _Options(),
    "toybox": _Options(),
    "fakeroot": _Options(),
    "catchsegv": _Options(),
    "npx": _Options(values="p", flags="yq", long_values=("--package",),
                    long_flags=("--yes", "--no", "--quiet")),
}  # fmt: skip


def _after_options(spec: _Options, args: Sequence[str]) -> int | str | None:
    """Where a wrapper's options end in ``args``, why that cannot be told, or None where an
    option says it runs nothing."""
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            return i + 1
        if not word.startswith("-") or (word == "-" and "-" not in spec.long_flags):
            return i
        if word.startswith("--") or word == "-":
            name = word.split("=", 1)[0]
            if name in spec.long_values:
                i += 1 if "=" in word else 2
            elif name in spec.long_flags:
                i += 1
            else:
                return f"option {_show(word)} is not known here"
            continue
        step = _short(spec, word)
        if step is None or isinstance(step, str):
            return step
        i += step
    return i


def _short(spec: _Options, word: str) -> int | str | None:
    """How many words one cluster of short options takes (1 or 2), why that is not known, or
    None for an option after which nothing runs."""
    for j, letter in enumerate(word[1:], start=1):
        if letter in spec.stops:
            return None
        if letter in spec.values:
            return 2 if j == len(word) - 1 else 1
        if letter in spec.optional:
            return 1
        if letter not in spec.flags:
            return f"option {_show(word)} is not known here"
    return 1


# -- shells and interpreters -----------------------------------------------------------------

_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "rbash"})
_OTHER_SHELLS = frozenset({"fish", "csh", "tcsh", "nu", "elvish", "xonsh", "pwsh", "powershell"})
_SHELL_LONG_VALUES = frozenset({"--rcfile", "--init-file"})
_AWKS = frozenset({"awk", "gawk", "mawk", "nawk"})
_CALLBACKS = {"mapfile": "C", "readarray": "C", "compgen": "CF", "complete": "CF",
              "hash": "p", "enable": "f", "bind": "x"}  # fmt: skip
_INLINE: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # interpreter: (short options giving code inline, short options taking a value,
    #               long options giving code inline)
    "python": ("c", "WXQ", ("--command",)),
    "perl": ("eE", "IMmxdDC", ()),
    "ruby": ("e", "IrCEFKTWx", ("--eval",)),
    "node": ("ep", "r", ("--eval", "--print")),
    "bun": ("e", "r", ("--eval", "--print")),
    "deno": ("", "", ("eval",)),
    "php": ("rRBFEa", "cdz", ()),
    "lua": ("e", "l", ()),
    "Rscript": ("e", "", ("--expr",)),
    "osascript": ("e", "lsi", ()),
    "tclsh": ("", "", ()),
    "expect": ("c", "", ()),
    "jshell": ("", "", ()),
}
_VERSION = frozenset({"--version", "-V", "-v", "--help", "-h"})


def _interpreter(program: str) -> str | None:
    if re.fullmatch(r"(?:python|pypy)[\d.]*", program):
        return "python"
    if re.fullmatch(r"(?:perl|ruby|node|lua|php)[\d.]*", program):
        return re.sub(r"[\d.]+$", "", program)
    if program == "nodejs":
        return "node"
    return program if program in _INLINE else None


def _inline(interpreter: str, args: Sequence[str]) -> str:
    """Why an interpreter's code cannot be known from the command ('' if it runs a file)."""
    inline, values, long_inline = _INLINE.get(interpreter, _INLINE["node"])
    if args[:1] and args[0] in _VERSION:
        return ""
    i = 0
    while i < len(args):
        word = args[i]
        if word in long_inline or word.split("=", 1)[0] in long_inline:
            return f"runs code given on its command line ({_show(word)})"
        if word == "-":
            break
        if not word.startswith("-"):
            return ""  # (a script file, or python -m's module: what it does is not seen)
        if word.startswith("--") or word == "--":
            i += 1
            continue
        for j, letter in enumerate(word[1:], start=1):
            if letter in inline:
                return f"runs code given on its command line ({_show(word)})"
            if interpreter == "python" and letter == "m":
                return ""
            if letter in values:
                i += 1 if j == len(word) - 1 else 0  # (its value: the next word)
                break
        i += 1
    return "runs code it reads from its input"


def _awk_program(args: Sequence[str]) -> str | None:
    i = 0
    while i < len(args):
        word = args[i]
        if word in ("-f", "--file") or word.startswith("-f"):
            return None  # (a program file: not seen)
        if word in ("-v", "-F", "--assign", "--field-separator"):
            i += 2
            continue
        if word in ("-e", "--source") and i + 1 < len(args):
            return args[i + 1]
        if not word.startswith("-") or word == "-":
            return word
        i += 1
    return None


_SED_EXEC = re.compile(
    r"(?:^|[;\n{}])\s*(?:[\d$]+|/(?:\\.|[^/])*/)?\s*e(?:\s|;|$)"  # the e command
    r"|(?:^|[;\n{}])\s*s(.)(?:\\.|(?!\1).)*\1(?:\\.|(?!\1).)*\1[gpiImM\d]*e",  # s///e
    re.DOTALL,
)
_GIT_PROGRAMS = frozenset({
    "pager", "editor", "sshcommand", "fsmonitor", "external", "textconv", "clean", "smudge",
    "process", "helper", "program", "hookspath", "askpass", "gitproxy", "command", "cmd",
    "sequenceeditor", "uploadpack", "receivepack", "tool", "path", "exec", "browser",
})  # fmt: skip
_PROGRAM_SETTINGS = frozenset({
    "PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV", "ENV", "PROMPT_COMMAND",
    "PS0", "PS1", "PS2", "PS4", "SHELLOPTS", "BASHOPTS", "PAGER", "MANPAGER", "EDITOR", "VISUAL",
    "BROWSER", "LESSOPEN", "LESSCLOSE", "GIT_PAGER", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR",
    "GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "SSH_ASKPASS",
    "GIT_PROXY_COMMAND", "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR", "GIT_DIR", "PYTHONPATH",
    "PYTHONSTARTUP", "NODE_OPTIONS", "PERL5OPT", "PERL5LIB", "RUBYOPT", "RUBYLIB",
})  # fmt: skip


# -- words -------------------------------------------------------------------------------------

_NOT_WORDS = frozenset({
    "variable_assignment", "file_redirect", "heredoc_redirect", "herestring_redirect",
    "comment",
})  # fmt: skip
_PATTERN = re.compile(r"[*?\[{]")  # a program name bash would expand as a pattern
_LITERAL = frozenset({"raw_string", "ansi_c_string", "comment", "heredoc_start", "heredoc_end"})
_HIDDEN = re.compile(r"`|\$\(")  # where bash would run a command inside a piece of text
_ESCAPED = re.compile(r"\\.", re.DOTALL)
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogatepass")


def _word(node: Node) -> _Word:
    """A word's value after bash removes quotes, or its text when known only at run time."""
    value = _value(node)
    return (_text(node), False) if value is None else (value, True)


def _value(node: Node) -> str | None:
    kind, text = node.type, _text(node)
    if kind == "command_name":
        return _value(node.children[0]) if node.child_count == 1 else None
    if kind in ("word", "number"):
        return _UNQUOTED.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text)
    if kind == "raw_string":
        return text[1:-1]
    if kind == "ansi_c_string":
        return _ansi_c(text[2:-1])
    if kind == "string":
        return _double_quoted(node)
    if kind == "translated_string":
        inner = node.named_children
        return _value(inner[0]) if len(inner) == 1 else None
    if kind == "concatenation":
        values = [_value(c) for c in node.children]
        return None if any(v is None for v in values) else "".join(values)  # type: ignore[arg-type]
    return None


def _double_quoted(node: Node) -> str | None:
    out = []
    for child in node.children:
        if child.type == "string_content":
            out.append(_IN_QUOTES.sub(lambda m: "" if m.group(1) == "\n" else m.group(1),
                                      _text(child)))  # fmt: skip
        elif child.type != '"':
            return None
    return "".join(out)


_UNQUOTED = re.compile(r"\\(.)", re.DOTALL)
_IN_QUOTES = re.compile(r"\\([$`\"\\\n])")
_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r",
            "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}  # fmt: skip
_ANSI_C = re.compile(
    r"\\(?:x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|([0-7]{1,3})|c(.)|(.))",
    re.DOTALL,
)


def _ansi_c(body: str) -> str:
    """The text of ``$'…'`` as bash reads it (``\\x72`` → ``r``, ``\\162`` → ``r``…)."""

    def one(m: re.Match[str]) -> str:
        hexa, u4, u8, octal, control, other = m.groups()
        number = hexa or u4 or u8
        if number:
            return chr(min(int(number, 16), 0x10FFFF))
        if octal:
            return chr(int(octal, 8) & 0xFF)
        if control:
            return chr(ord(control) & 0x1F)
        return _ESCAPES.get(other, "\\" + other)

    return _ANSI_C.sub(one, body)


def _base(program: str) -> str:
    return os.path.basename(program) or program


def _show(text: str, limit: int = 60) -> str:
    """A piece of the command for a reason: short, one line, no control characters."""
    flat = "".join(c if c.isprintable() else "?" for c in text)
    return f"`{flat[:limit]}…`" if len(flat) > limit else f"`{flat}`"
