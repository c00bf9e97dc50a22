"""What a program runs in turn: the knowledge :mod:`retinue.policy.shellwords` follows.

Wrappers and their options (``sudo``, ``env``, ``timeout``, ``xargs``…), shells given text
(``bash -c``), ``eval``, ``trap``, ``find -exec``/``-delete``, git's aliases and settings,
interpreters given code inline (``python3 -c``) or their program on their input or a
descriptor (``bash /dev/stdin``), the editors that run ``!`` commands, builtins that evaluate a
literal as arithmetic or a name (``let``, ``read``, ``printf -v``), GNU long options abbreviated
to a unique prefix, and the settings that name a program or are code (``PAGER=``,
``BASH_FUNC_x%%=``). Each :func:`follow` step tells the reader (a :class:`Reader`) the command found
inside, the text to parse in turn, or why what runs cannot be known.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Reader", "Word", "base", "follow", "sets_program", "show"]

Word = tuple[str, bool]  # a word's value (or its text, when not known) and whether known


class Reader(Protocol):
    """What a command line's walk offers the steps that follow a program."""

    def run(self, words: Sequence[Word], written: str, depth: int) -> None:
        """Record a command found inside another, and follow it in turn."""

    def nested(self, word: Word, depth: int, what: str) -> None:
        """Parse text a command runs (``bash -c TEXT``) as a command line."""

    def doubt(self, why: str) -> None:
        """Say why what runs cannot be known."""

    def setting(self, assignment: str) -> None:
        """Look at a ``NAME=value`` a command is given."""


def follow(reader: Reader, words: Sequence[Word], depth: int) -> None:
    """Tell ``reader`` what the command ``words`` (its program known) runs in turn. Names are
    compared in lower case (``SUDO`` runs ``sudo`` where the file system ignores case)."""
    program = base(words[0][0]).lower()
    if _reads_own_script(program, words):
        reader.doubt(f"{program} reads its program from its input or a descriptor")
        return
    if program in _ARITHMETIC:
        _arithmetic(reader, program, words)
    if program in _WRAPPERS:
        _wrapped(reader, program, words, depth)
    elif program in _FOLLOW:
        _FOLLOW[program](reader, words, depth)
    elif program in _SHELLS:
        _shell(reader, words, depth)
    elif program == "ip" and any(w == "exec" for w, _ in words[1:]):
        reader.doubt("ip ... exec runs a command it is given")
    elif program in _LAUNCHERS and not (len(words) == 2 and words[1][0] in _VERSION):
        reader.doubt(f"{program} runs a command it is given, in a way not read here")
    elif program in _EDITORS and not (len(words) == 2 and words[1][0] in _VERSION):
        reader.doubt(f"{program} runs the shell commands (`!`) of its script or its input")
    elif program in _OTHER_SHELLS:
        reader.doubt(f"{program} commands cannot be read as bash")
    else:
        _inspect(reader, program, words)


def sets_program(name: str) -> bool:
    """Whether setting the variable ``name`` changes what other programs run."""
    return name in _PROGRAM_SETTINGS or name.startswith(("GIT_CONFIG_", "BASH_FUNC_", "LD_"))


def base(program: str) -> str:
    """A program's name without its folder (``/bin/rm`` → ``rm``)."""
    return os.path.basename(program) or program


def show(text: str, limit: int = 60) -> str:
    """A piece of the command for a reason: short, one line, no control characters."""
    flat = "".join(c if c.isprintable() else "?" for c in text)
    return f"`{flat[:limit]}…`" if len(flat) > limit else f"`{flat}`"


def _is_setting(word: str) -> bool:
    """Whether ``env`` (``sudo``) reads ``word`` as a setting: any word with ``=`` in it
    (``BASH_FUNC_ls%%=…`` too)."""
    return "=" in word and not word.startswith("=")


def _wrapped(
    reader: Reader, program: str, words: Sequence[Word], depth: int, spec: _Options | None = None
) -> None:
    """A wrapper: the command it runs starts after its options."""
    spec = spec or _WRAPPERS[program]
    start = _after_options(spec, [w for w, _ in words[1:]])
    if start is None:  # (command -v rm: it only says what rm is)
        return
    if isinstance(start, str):
        reader.doubt(f"{program}: {start}")
        return
    start += 1 + spec.operands
    while spec.settings and start < len(words) and _is_setting(words[start][0]):
        reader.setting(words[start][0])
        start += 1
    if start >= len(words):
        return
    if not all(ok for _, ok in words[: start + 1]):
        reader.doubt(f"what {program} runs is known only when it runs")
        return
    inner = words[start:]
    reader.run(inner, " ".join(w for w, _ in inner), depth)


def _shell(reader: Reader, words: Sequence[Word], depth: int) -> None:
    """``bash -c TEXT``: TEXT is parsed; ``bash FILE`` runs a file (not seen)."""
    program, i, command = base(words[0][0]), 1, False
    while i < len(words):
        word, ok = words[i]
        if not ok:
            reader.doubt(f"{program}'s options are known only when it runs")
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
            reader.doubt(f"{program} {word} runs what it reads, or the user's aliases")
            return
        command = command or "c" in letters
        i += 1 + sum(letters.count(x) for x in "oO")
    if command:
        if i >= len(words):
            reader.doubt(f"{program} -c without a command")
            return
        reader.nested(words[i], depth, program)
    elif i >= len(words):
        reader.doubt(f"{program} runs the commands it reads from its input")


def _inspect(reader: Reader, program: str, words: Sequence[Word]) -> None:
    """Programs that run code given inline, or read from their input."""
    args = [w for w, _ in words[1:]]
    interpreter = _interpreter(program)
    if interpreter is not None:
        why = _inline(interpreter, args)
        if why:
            reader.doubt(f"{program} {why}")
        return
    if program in _AWKS:
        script = next((a for a in _awk_texts(args) if "system" in a or "|" in a), None)
        if script is not None:
            reader.doubt(f"{program}'s program may run other commands ({show(script)})")
    elif program in ("sed", "gsed") and any(_sed_runs(a) for a in _sed_scripts(args)):
        reader.doubt(f"{program}'s script may run commands (its 'e')")
    elif program in _COMMAND_OPTIONS and any(
        _is_option(a, o) for a in _old_style(program, args) for o in _COMMAND_OPTIONS[program]
    ):
        reader.doubt(f"{program} runs a command given to one of its options")
    elif program in ("ssh", "scp", "sftp") and any(_SSH_RUNS.search(a) for a in args):
        reader.doubt(f"{program} runs a command its options or a config file name")
    elif program == "shopt" and set(args) & {"expand_aliases", "extglob", "extdebug"}:
        reader.doubt(f"shopt {show(' '.join(args))} changes how bash reads what follows")
    elif program in _CALLBACKS and any(
        a.startswith("-") and set(a[1:]) & set(_CALLBACKS[program]) for a in args
    ):
        reader.doubt(f"{program} runs text given to one of its options")


def _reads_own_script(program: str, words: Sequence[Word]) -> bool:
    """Whether a program that runs a script (a shell, an interpreter, awk, sed, make…) is
    given one read from its input or a descriptor (``bash /dev/stdin``, ``awk -f <(…)``).
    Awk, sed and make read a script file only after ``-f``; the others take any word."""
    by_option = program in _AWKS or program in _SCRIPTED
    if not (by_option or program in _SHELLS or _interpreter(program) is not None):
        return False
    previous = ""
    for word, ok in words[1:]:
        after_f, previous = _gives_file(previous), (word if ok else "")
        if by_option and not after_f and not _gives_file(word, attached=True):
            continue
        if not ok and word.startswith(("<(", ">(")):
            return True
        if ok and _STDIN.search(word):
            return True
    return False


def _gives_file(word: str, attached: bool = False) -> bool:
    """Whether ``word`` is ``-f`` (``-nf``, ``--file``, ``--fi``: a unique prefix), or with
    ``attached`` gives its value too (``-f/dev/stdin``, ``--file=…``)."""
    if attached:
        name, equals, _ = word.partition("=")
        return bool(re.match(r"-[A-Za-z]*f.", word)) or (bool(equals) and _gives_file(name))
    if re.fullmatch(r"-[A-Za-z]*f", word):
        return True
    return len(word) > 2 and any(o.startswith(word) for o in ("--file", "--makefile"))


_STDIN = re.compile(
    r"(?:^|[=@]|^-[A-Za-z]*f)(?:/dev/stdin|/dev/fd/|/proc/[^/]+/fd/|/proc/[^/]+/task/)"
)
_SCRIPTED = frozenset({"sed", "gsed", "make", "gmake"})


def _arithmetic(reader: Reader, program: str, words: Sequence[Word]) -> None:
    """Builtins whose arguments bash may read as names or arithmetic (``let``, ``read``,
    ``printf -v``, ``test -v``, ``compgen -W``…): a literal ``$(``/backtick in one of them
    runs a command (``let 'a[$(rm f)]=1'``); a name that sets a program is a setting."""
    args = [w for w, _ in words[1:]]
    if program in ("printf", "test") and "-v" not in args:
        return
    if program in ("compgen", "complete") and not any(a.startswith("-") and "W" in a for a in args):
        return
    for word in args:
        if _HIDDEN.search(word):
            reader.doubt(f"{program} may evaluate {show(word)} and run a command")
            return
    if program in ("read", "printf", "mapfile", "readarray", "getopts", "declare", "typeset",
                   "export", "local", "readonly"):  # fmt: skip
        for word in args:
            if not word.startswith("-"):
                reader.setting(word if "=" in word else word + "=")


_HIDDEN = re.compile(r"`|\$\(")
_ARITHMETIC = frozenset({
    "let", "read", "printf", "test", "compgen", "complete", "declare", "typeset", "export",
    "local", "readonly", "unset", "mapfile", "readarray", "getopts", "wait", "[",
})  # fmt: skip
_LAUNCHERS = frozenset({  # (programs that run a command given to them, as text or words)
    "perf", "hyperfine", "entr", "tmux", "screen", "at", "batch", "xterm", "socat", "nc",
    "ncat", "netcat", "watchexec", "nodemon", "mpirun", "mpiexec", "srun", "bwrap", "proot",
    "start-stop-daemon", "daemonize", "heaptrack", "fakechroot", "expect", "sem",
    "ssh-agent", "dbus-launch", "lxc-attach", "docker", "podman", "kubectl", "crontab",
})  # fmt: skip
_EDITORS = frozenset({  # (editors and consoles with a shell escape: ``!``, ``.shell``, ``\\!``)
    "ed", "red", "ex", "vi", "vim", "view", "rvim", "rview", "nvim", "gvim", "gview", "evim",
    "vimdiff", "nvi", "elvis", "emacs", "dc", "m4", "gdb", "sqlite3", "psql", "mysql",
    "mariadb", "gnuplot", "octave", "r", "ftp", "sftp", "lftp",
})  # fmt: skip


# -- what follows other commands -----------------------------------------------------------


def _eval(reader: Reader, words: Sequence[Word], depth: int) -> None:
    args = words[1:]
    if args and args[0][0] == "--":  # (bash's builtins end their options at --)
        args = args[1:]
    if args:
        text = " ".join(w for w, _ in args)
        reader.nested((text, all(ok for _, ok in args)), depth, "eval")


def _trap(reader: Reader, words: Sequence[Word], depth: int) -> None:
    args = [w for w in words[1:] if not w[0].startswith("-") or w[0] == "-"]
    if len(args) >= 2:  # (trap ACTION SIGNAL…; trap SIGNAL alone resets it)
        reader.nested(args[0], depth, "trap")


def _source(reader: Reader, words: Sequence[Word], depth: int) -> None:
    del depth
    name = words[1][0] if len(words) > 1 else ""
    reader.doubt(f"{base(words[0][0])} {show(name)} runs a file's commands, unseen")


def _alias(reader: Reader, words: Sequence[Word], depth: int) -> None:
    defined = [w for w in words[1:] if "=" in w[0]]
    if defined:
        reader.doubt("alias changes what later commands' names mean")
    for value, ok in defined:
        reader.nested((value.split("=", 1)[1], ok), depth, "alias")


def _su(reader: Reader, words: Sequence[Word], depth: int) -> None:
    """``su -c TEXT`` (``runuser``, ``script``, ``flock``): TEXT is parsed."""
    args, program = list(words[1:]), base(words[0][0])
    for i, (word, _) in enumerate(args):
        short = word.startswith("-") and not word.startswith("--") and word.endswith("c")
        if (short or word in ("--command", "--session-command")) and i + 1 < len(args):
            reader.nested(args[i + 1], depth, program)  # (-c, or a cluster ending in it: -qc)
            return
        if word.startswith(("--command=", "--session-command=")):
            reader.nested((word.split("=", 1)[1], args[i][1]), depth, program)
            return
    reader.doubt(f"{program} without -c starts a shell that runs what it reads")


def _watch(reader: Reader, words: Sequence[Word], depth: int) -> None:
    spec = _Options(values="nq", flags="bcdegptwrhx", long_values=("--interval",))
    start = _after_options(spec, [w for w, _ in words[1:]])
    if start is None or isinstance(start, str):
        reader.doubt(f"watch: {start or 'an option not known here'}")
        return
    rest = words[1 + start :]
    if rest:
        reader.nested((" ".join(w for w, _ in rest), all(ok for _, ok in rest)), depth, "watch")


def _find(reader: Reader, words: Sequence[Word], depth: int) -> None:
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


def _git(reader: Reader, words: Sequence[Word], depth: int) -> None:
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
            reader.doubt(f"git {show(word)} changes what git runs")
        elif word.startswith("-c") and word != "-c":
            _git_setting(reader, (word[2:], ok), depth)
        i += 1
    if any(w.lower().startswith("ext::") for w, _ in args):
        reader.doubt("git's ext:: transport runs its address as a command")
    if i < len(args):
        _git_command(reader, args[i][0], args[i + 1 :], depth)


def _git_command(reader: Reader, sub: str, args: Sequence[Word], depth: int) -> None:
    """Git subcommands that run a command given to them (``rebase -x``, ``bisect run``…)."""
    words = [w for w, _ in args]
    if sub == "bisect" and words[:1] == ["run"] and len(args) > 1:
        if args[1][1]:
            reader.run(args[1:], " ".join(words[1:]), depth)
        else:
            reader.doubt("what git bisect run runs is known only when it runs")
    elif sub == "rebase":
        for k, word in enumerate(words):
            if word in ("-x", "--exec") and k + 1 < len(args):
                reader.nested(args[k + 1], depth, "git rebase --exec")
            elif word.startswith(("--exec=", "-x")) and word != "-x":
                text = word.split("=", 1)[1] if "=" in word else word[2:]
                reader.nested((text, args[k][1]), depth, "git rebase --exec")
    elif sub == "submodule" and "foreach" in words:
        rest = [a for a in args[words.index("foreach") + 1 :] if not a[0].startswith("--")]
        if rest:
            text = (" ".join(w for w, _ in rest), all(ok for _, ok in rest))
            reader.nested(text, depth, "git submodule foreach")
    elif sub == "filter-branch" or any(
        _is_option(w, o) for w in words for o in _GIT_COMMAND_OPTIONS.get(sub, ())
    ):  # (git's options too are taken by a unique prefix: --upload-pa=…)
        reader.doubt(f"git {sub} runs a command given as text")
    elif sub == "config" and any(_git_program_key(w.lower()) for w in words):
        reader.doubt("git config sets a program git runs later")


def _git_program_key(key: str) -> bool:
    """Whether a git setting names a program (``core.pager``, ``alias.x``, ``pager.log``…)."""
    return key.startswith(("alias.", "include", "pager.", "protocol.", "url.")) or (
        "." in key and key.rsplit(".", 1)[-1] in _GIT_PROGRAMS
    )


def _git_setting(reader: Reader, setting: Word, depth: int) -> None:
    text, ok = setting
    key, _, value = text.partition("=")
    key = key.lower()
    if not ok:
        reader.doubt("git -c with a setting known only when it runs")
    elif key.startswith("alias.") and value.startswith("!"):
        reader.nested((value[1:], True), depth, "a git alias")
    elif _git_program_key(key):
        reader.doubt(f"git -c {show(text)} changes what git runs")


def _flock(reader: Reader, words: Sequence[Word], depth: int) -> None:
    """``flock FILE -c TEXT`` (parsed) or ``flock FILE CMD…`` (a wrapper)."""
    if any(w in ("-c", "--command") or w.startswith("--command=") for w, _ in words[1:]):
        _su(reader, words, depth)
    else:
        _wrapped(reader, "flock", words, depth, _FLOCK)


def _parallel(reader: Reader, words: Sequence[Word], depth: int) -> None:
    """``parallel CMD ::: ARGS``: CMD runs through a shell, as text."""
    args, i = list(words[1:]), 0
    while i < len(args) and args[i][0].startswith("-"):
        word = args[i][0]
        if word in ("-j", "--jobs"):
            i += 2
        elif _PARALLEL_FLAGS.fullmatch(word):
            i += 1
        else:
            reader.doubt(f"parallel: option {show(word)} is not known here")
            return
    end = next((j for j in range(i, len(args)) if args[j][0].startswith(":::")), len(args))
    command = args[i:end]
    if not command:
        reader.doubt("parallel runs the commands it reads from its input")
        return
    text = (" ".join(w for w, _ in command), all(ok for _, ok in command))
    reader.nested(text, depth, "parallel")


def _uv_run(reader: Reader, words: Sequence[Word], depth: int) -> None:
    """``uv run CMD`` (``poetry run``, ``pipenv run``, ``conda run``…) runs CMD."""
    if len(words) < 3 or words[1][0] not in ("run", "exec"):
        return
    if words[2][0].startswith("-") or not words[2][1]:
        reader.doubt(f"what {base(words[0][0])} {words[1][0]} runs is not known")
        return
    reader.run(words[2:], " ".join(w for w, _ in words[2:]), depth)


def _setarch(reader: Reader, words: Sequence[Word], depth: int) -> None:
    """``setarch ARCH [options] [CMD…]``: its architecture comes before its options."""
    if len(words) > 2:
        _wrapped(reader, "setarch", [words[0], *words[2:]], depth, _WRAPPERS["linux32"])


def _capsh(reader: Reader, words: Sequence[Word], depth: int) -> None:
    """``capsh [options] -- ARGS``: ARGS go to ``/bin/bash`` (``--shell=`` names another)."""
    for k, (word, ok) in enumerate(words[1:], start=1):
        if not ok or word == "==" or word.startswith("--shell"):
            reader.doubt(f"capsh {show(word)} runs a shell not known here")
            return
        if word == "--":
            _shell(reader, [("bash", True), *words[k + 1 :]], depth)
            return


def _sg(reader: Reader, words: Sequence[Word], depth: int) -> None:
    """``sg GROUP -c TEXT`` or ``sg GROUP TEXT``: TEXT runs through a shell; ``newgrp``
    starts one that reads its input."""
    args = [w for w in words[1:] if w[0] != "-"]
    if base(words[0][0]) == "sg" and len(args) >= 2:
        rest = args[2:] if args[1][0] == "-c" else args[1:]
        if rest:
            reader.nested(rest[0], depth, "sg")
            return
    reader.doubt(f"{base(words[0][0])} starts a shell that runs what it reads")


def _coproc(reader: Reader, words: Sequence[Word], depth: int) -> None:
    """``coproc CMD…`` runs CMD; ``coproc [NAME] { …; }`` is read otherwise by the parser."""
    if any(w in _RESERVED for w, _ in words[1:3]):  # (coproc { rm f; }: the parser's words)
        reader.doubt("coproc with a compound command (not read here)")
        return
    _wrapped(reader, "coproc", words, depth, _Options())


_RESERVED = frozenset({"{", "(", "((", "[[", "if", "while", "until", "for", "case", "select"})

_FOLLOW: dict[str, Callable[[Reader, Sequence[Word], int], None]] = {
    "setarch": _setarch, "capsh": _capsh, "sg": _sg, "newgrp": _sg, "coproc": _coproc,
    "eval": _eval, "trap": _trap, "source": _source, ".": _source, "alias": _alias,
    "su": _su, "runuser": _su, "watch": _watch, "find": _find, "git": _git,
    "uv": _uv_run, "poetry": _uv_run, "pipenv": _uv_run, "bundle": _uv_run,
    "script": _su, "flock": _flock, "parallel": _parallel,
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
    joined_long: bool = False  # every long option gives its value after = (valgrind)


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
    "unbuffer": _Options(),
    "busybox": _Options(),
    "toybox": _Options(),
    "fakeroot": _Options(),
    "catchsegv": _Options(),
    "eatmydata": _Options(),
    "nocache": _Options(),
    "torsocks": _Options(),
    "chronic": _Options(flags="ev"),
    "ifne": _Options(flags="n"),
    "pkexec": _Options(long_values=("--user",),
                       long_flags=("--keep-cwd", "--disable-internal-agent")),
    "proxychains": _Options(values="f", flags="q"),
    "proxychains4": _Options(values="f", flags="q"),
    "setpriv": _Options(flags="d", long_flags=(
        "--dump", "--nnp", "--no-new-privs", "--clear-groups", "--keep-groups", "--init-groups",
        "--reset-env"), long_values=(
        "--ruid", "--euid", "--rgid", "--egid", "--reuid", "--regid", "--groups", "--inh-caps",
        "--ambient-caps", "--bounding-set", "--securebits", "--pdeathsig", "--selinux-label",
        "--apparmor-profile", "--landlock-access", "--landlock-rule", "--seccomp-filter")),
    "unshare": _Options(values="SGRw", flags="muinpUCTfrc", long_values=(
        "--propagation", "--setgroups", "--setuid", "--setgid", "--root", "--wd", "--map-user",
        "--map-group", "--map-users", "--map-groups", "--monotonic", "--boottime"),
        long_flags=("--mount", "--uts", "--ipc", "--net", "--pid", "--user", "--cgroup",
                    "--time", "--fork", "--kill-child", "--mount-proc", "--map-root-user",
                    "--map-current-user", "--map-auto", "--keep-caps",
                    "--mount-binfmt")),
    "prlimit": _Options(optional="cdefilmnqrstuvxy", flags="", stops="p", values="o",
                        long_values=("--output",), long_flags=(
        "--core", "--data", "--fsize", "--sigpending", "--memlock", "--rss", "--nofile",
        "--msgqueue", "--nice", "--stack", "--cpu", "--nproc", "--as", "--locks",
        "--rtprio", "--rttime", "--noheadings", "--raw", "--verbose")),
    "chrt": _Options(values="TPD", flags="abdfiorRvse", stops="mp", operands=1,
                     long_values=("--sched-runtime", "--sched-period", "--sched-deadline"),
                     long_flags=("--all-tasks", "--batch", "--deadline", "--fifo", "--idle",
                                 "--other", "--rr", "--reset-on-fork", "--verbose",
                                 "--ext")),
    "nsenter": _Options(values="tSGWN", flags="muinpCUTaeFZcrw", long_values=(
        "--target", "--setuid", "--setgid", "--wdns", "--net-socket", "--user-parent"),
        long_flags=("--mount", "--uts", "--ipc", "--net", "--pid", "--cgroup", "--user",
                    "--time", "--all", "--preserve-credentials", "--root", "--wd", "--env",
                    "--no-fork", "--follow-context", "--join-cgroup", "--keep-caps")),
    "valgrind": _Options(flags="qvd", joined_long=True),
    "cgexec": _Options(values="g", long_flags=("--sticky",)),
    "firejail": _Options(joined_long=True),
    "systemd-run": _Options(values="pEuMHsG", flags="rtPqdS", long_values=(
        "--unit", "--property", "--description", "--slice", "--setenv", "--host",
        "--machine", "--uid", "--gid", "--nice", "--working-directory", "--service-type"),
        long_flags=("--user", "--system", "--scope", "--remain-after-exit", "--pty",
                    "--pipe", "--quiet", "--wait", "--collect", "--same-dir",
                    "--no-block", "--no-ask-password", "--send-sighup")),
    "systemd-inhibit": _Options(long_values=("--what", "--who", "--why", "--mode")),
    "linux32": _Options(flags="vRFZLXBIST3"),
    "linux64": _Options(flags="vRFZLXBIST3"),
    "i386": _Options(flags="vRFZLXBIST3"),
    "x86_64": _Options(flags="vRFZLXBIST3"),
    "uname26": _Options(flags="vRFZLXBIST3"),
    "schedtool": _Options(values="aenp", flags="NFRBID0123456789"),
    "numactl": _Options(values="CNmMipPl", flags="asSH", joined_long=True),
    "cpulimit": _Options(values="lpe", flags="bfkvz", joined_long=True),
    "trickle": _Options(values="udwtlnLs", flags="sv"),
    "faketime": _Options(values="m", flags="f", operands=1),
    "dbus-run-session": _Options(joined_long=True),
    "xvfb-run": _Options(values="nsfepw", flags="al", joined_long=True),
    "gosu": _Options(operands=1),
    "su-exec": _Options(operands=1),
    "setuidgid": _Options(operands=1),
    "envuidgid": _Options(operands=1),
    "envdir": _Options(operands=1, settings=True),
    "softlimit": _Options(),
    "chpst": _Options(),
    "tini": _Options(flags="svwgl"),
    "dumb-init": _Options(flags="vc", joined_long=True),
    "rlwrap": _Options(),
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
            elif name in spec.long_flags or (spec.joined_long and name != "-"):
                i += 1
            else:
                return f"option {show(word)} is not known here"
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
            return f"option {show(word)} is not known here"
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
    "rscript": ("e", "", ("--expr",)),
    "osascript": ("e", "lsi", ()),
    "tclsh": ("", "", ()),
    "expect": ("c", "", ()),
    "jshell": ("", "", ()),
    "julia": ("eE", "", ("--eval", "--print")),
    "groovy": ("e", "", ()),
    "elixir": ("e", "r", ("--eval",)),
    "erl": ("", "", ("-eval",)),
    "ghc": ("e", "", ()),
    "racket": ("e", "", ("--eval",)),
    "sbcl": ("", "", ("--eval",)),
    "guile": ("c", "", ()),
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
            return f"runs code given on its command line ({show(word)})"
        if word == "-":
            break
        if not word.startswith("-"):
            return ""  # (a script file, or python -m's module: what it does is not seen)
        if word.startswith("--") or word == "--":
            i += 1
            continue
        for j, letter in enumerate(word[1:], start=1):
            if letter in inline:
                return f"runs code given on its command line ({show(word)})"
            if interpreter == "python" and letter == "m":
                return ""
            if letter in values:
                i += 1 if j == len(word) - 1 else 0  # (its value: the next word)
                break
        i += 1
    return "runs code it reads from its input"


def _awk_texts(args: Sequence[str]) -> list[str]:
    """Every word awk may read as program text (``-e…``, ``--so=…`` and the first operand
    alike): all but a field separator's or a variable's value (``-F'|'``, ``-v 'OFS=|'``)."""
    out, skip = [], False
    for word in args:
        if skip:
            skip = False
        elif word in ("-F", "-v") or (
            len(word) > 2 and any(o.startswith(word) for o in ("--field-separator", "--assign"))
        ):
            skip = True
        elif not word.startswith(("-F", "-v", "--fi", "--as")):
            out.append(word)
    return out


_FLOCK = _Options(values="wE", flags="sxeunoF", operands=1,
                  long_values=("--timeout", "--conflict-exit-code"),
                  long_flags=("--shared", "--exclusive", "--unlock", "--nonblock",
                              "--close", "--no-fork", "--verbose"))  # fmt: skip
_PARALLEL_FLAGS = re.compile(
    r"-j\d+|--jobs=\S+|-k|--keep-order|-q|--quote|--will-cite|-0|--null|-X|-m|-v|--bar"
    r"|--eta|--tag|-u|--ungroup|--line-buffer|--halt=\S+"
)
_COMMAND_OPTIONS: dict[str, tuple[str, ...]] = {  # options whose value is a command
    "tar": ("--to-command", "--checkpoint-action", "--use-compress-program", "-I",
            "--info-script", "--new-volume-script", "-F", "--rsh-command", "--rmt-command"),
    "rsync": ("-e", "--rsh", "--rsync-path"),
    "zip": ("-TT", "--unzip-command"),
    "man": ("-P", "--pager", "-H", "--html"),
    "make": ("--eval", "-E"),
    "gdb": ("-ex", "-iex", "-x", "-ix", "--eval-command", "--command"),
    "vim": ("-c", "--cmd", "-S", "+"), "vi": ("-c", "--cmd", "-S", "+"),
    "nvim": ("-c", "--cmd", "-S", "+"), "ex": ("-c", "--cmd", "-S", "+"),
}  # fmt: skip
_GIT_COMMAND_OPTIONS: dict[str, tuple[str, ...]] = {
    "clone": ("--upload-pack", "-u", "--template", "--config", "-c"),
    "fetch": ("--upload-pack",), "pull": ("--upload-pack",), "ls-remote": ("--upload-pack",),
    "push": ("--receive-pack", "--exec"), "archive": ("--exec",),
    "difftool": ("-x", "--extcmd", "-t", "--tool"), "mergetool": ("-t", "--tool"),
    "grep": ("-O", "--open-files-in-pager"),
}  # fmt: skip
_SSH_RUNS = re.compile(r"(?i)proxycommand|localcommand|knownhostscommand|match|^-[FSD]")


def _is_option(word: str, option: str) -> bool:
    """Whether ``word`` gives ``option`` (``-I zstd``, ``-Izstd``, ``--rsh=…``, ``+cmd``)."""
    if option == "+":
        return word.startswith("+")
    if option.startswith("--"):  # (GNU getopt takes any unique prefix: --to-com=…)
        name = word.split("=", 1)[0]
        return len(name) > 2 and option.startswith(name)
    if len(option) == 2 and word[:1] == "-" and word[1:2] != "-":  # (in a cluster: -avze)
        return option[1] in word[1:]
    return word.startswith(option)


def _old_style(program: str, args: Sequence[str]) -> Sequence[str]:
    """``tar xIf PROG a.tar``: tar reads a first word without a dash as its options."""
    if program == "tar" and args and not args[0].startswith("-"):
        return ["-" + args[0], *args[1:]]
    return args


def _sed_scripts(args: Sequence[str]) -> list[str]:
    """Every piece of ``args`` that sed may read as its script: each word, a long option's
    value (``--expression=…``, ``--expr=…``), what follows ``e`` in a cluster (``-ne…``)."""
    out = []
    for word in args:
        out.append(word)
        if word.startswith("--") and "=" in word:
            out.append(word.split("=", 1)[1])
        elif word.startswith("-") and "e" in word:
            out.append(word[word.index("e") + 1 :])
    return out


def _sed_address(n: int) -> str:
    r"""One sed address (a line, ``$``, ``first~step``, ``/re/``, ``\%re%``), its delimiter
    captured as group ``n``."""
    return rf"(?:[\d$]+(?:~\d+)?|/(?:\\.|[^/])*/[IM]*|\\(.)(?:\\.|(?!\{n}).)*\{n}[IM]*)"


_SED_EXEC = (
    re.compile(  # the e command, after an address or a range
        r"(?:^|[;\n{}])\s*(?:" + _sed_address(1) + r"(?:\s*,\s*(?:" + _sed_address(2)
        + r"|[+~]\d+))?)?\s*!*\s*e(?:[\s;}\\]|$)",
        re.DOTALL,
    ),
    re.compile(  # s///e
        r"(?:^|[;\n{}])\s*s(.)(?:\\.|(?!\1).)*\1(?:\\.|(?!\1).)*\1[gpiImMw\d]*e", re.DOTALL
    ),
)  # fmt: skip


def _sed_runs(script: str) -> bool:
    return any(pattern.search(script) for pattern in _SED_EXEC)


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
    "TEXTDOMAIN", "TEXTDOMAINDIR", "PS3", "FCEDIT", "SUDO_ASKPASS", "TAR_OPTIONS", "RSYNC_RSH",
    "RSYNC_CONNECT_PROG", "MAKEFLAGS", "GNUMAKEFLAGS", "MFLAGS", "MANOPT", "PERL5DB",
    "PERLDB_OPTS", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "SYSTEMD_PAGER",
    "SYSTEMD_EDITOR", "GCONV_PATH", "PYTHONHOME", "BASH_LOADABLES_PATH", "GIT_CONFIG",
})  # fmt: skip
