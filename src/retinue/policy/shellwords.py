"""What a shell command line runs: every simple command bash would start, found by a parser.

The Bash permission rules (:mod:`retinue.policy.rules`) are matched against what
:func:`analyse` finds, not against the text. The command is parsed with tree-sitter-bash and
walked whole, so a rule for ``rm`` sees the ``rm`` in ``a && rm f``, ``a | rm f``, ``(rm f)``,
``$(rm f)``, backticks, ``<(rm f)``, a heredoc, a function's body, a loop or a test. Words are read
as bash reads them: quotes and backslashes removed (``r''m``, ``"r"m``, ``\\rm`` and
``$'\\x72m'`` all read ``rm``), lines continued with a backslash joined (``r\\⏎m``), leading
``NAME=value`` words set aside. What runs another command given as words or as text is followed
(:mod:`retinue.policy.shellprograms` knows which): ``bash -c 'rm f'``, ``eval 'rm f'``, ``trap``,
``su -c``, ``watch``, ``parallel`` (literal text parsed in turn, at most :data:`MAX_NESTING`
deep); wrappers such as ``sudo``, ``env``, ``timeout``, ``nice``, ``nohup``, ``xargs``,
``command``, ``exec``, ``time``, ``stdbuf``, ``setsid``, ``flock``, ``busybox``, ``uv run``,
``setpriv``, ``unshare``, ``prlimit``, ``setarch``, ``chrt``, ``nsenter``, ``valgrind``,
``cgexec``, ``firejail``, ``systemd-run``, ``sg``, ``capsh --``, with their options read as each
documents them (``eval --`` too); ``find … -exec rm {} ;`` (``find … -delete`` reads as ``rm -rf``
of its starting points); ``git -c alias.x='!rm f' x``, ``git rebase -x``, ``git bisect
run``.

What cannot be known before the command runs is reported, one reason each
(:attr:`CommandLine.unknown`): a program named by an expansion, a pattern or a brace expansion
(``$X f``, ``rm${IFS}f``, ``/bin/r?``, ``sudo {rm,f}``); ``eval``/``bash -c`` of text that is not
literal; ``source`` and ``.`` (a file's commands), ``alias`` and ``shopt -s expand_aliases`` (they
change what later text means); code given inline to an interpreter (``python3 -c``, ``perl -e``,
``node -e``, ``ruby -e``, ``php -r``, an ``awk`` program that calls ``system`` or a pipe, ``sed``'s
``e`` after any address, ``tar --to-command`` or any unique prefix of it (``--to-com=``: GNU getopt
takes one), ``rsync -e``…), or read from its input or a descriptor (``curl … | sh``, ``python3
<<EOF``, ``bash /dev/stdin``, ``awk -f /dev/fd/0``, ``awk -f <(…)``); the editors, which run a
script's ``!`` commands (``ed``, ``ex``, ``vim``, ``view``…); a setting that names a program or is
code (``PATH=``, ``PAGER=``, ``GIT_SSH_COMMAND=``, ``LD_PRELOAD=``, ``BASH_ENV=``,
``BASH_FUNC_x%%=``, ``PS4=``…) however it is set: by an assignment, ``env``, or any spelling of
``export``/``declare``/``local``/``readonly`` (``export 'BASH_ENV=s'``, ``BASH_E""NV=s``), a
``read`` or ``printf -v`` name, a nameref (``declare -n``); a literal with ``$(`` or a backtick
where bash evaluates it as arithmetic or a name (kept in a variable, a subscript ``a['$(…)']``,
``let``, ``read``, ``printf -v``, ``test -v``, ``[[ … -eq … ]]``, ``$(( ))``, ``(( ))``,
``declare``, ``unset``, ``compgen -W``); a git setting that names a program (``-c
core.pager=…``, ``protocol.*``) and git's ``ext::`` transport; a named ``coproc``; a wrapper
option this module does not know; bash's own network redirections (``/dev/tcp/…``); text the
parser cannot read whole or reads otherwise than bash; and a command longer than
:data:`MAX_LENGTH` characters, nested deeper than :data:`MAX_NESTING` or with more than
:data:`MAX_COMMANDS` commands.

No parser sees what a program does once it runs: ``python3 x.py``, ``bash x.sh``, ``make`` or
``npm test`` may delete files or reach the network, and nothing here says so; nor a value read
when it runs (a file's text, ``read x``) that a later step runs. The sandbox, not the rules,
bounds that.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import tree_sitter
import tree_sitter_bash

from retinue.policy.shellprograms import Word, base, follow, sets_program, show

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
        return base(self.words[0])


@dataclass(frozen=True, slots=True)
class CommandLine:
    """Every simple command found, and why some of what runs cannot be known."""

    commands: tuple[Simple, ...]
    unknown: tuple[str, ...]


@functools.lru_cache(maxsize=128)
def analyse(command: str) -> CommandLine:
    """The simple commands ``command`` runs (as far as they can be known before it runs)."""
    reader = _Reader()
    if "\0" in command:
        reader.doubt("a NUL character (bash cannot be given it)")
        return CommandLine((), tuple(reader.unknown))
    try:
        reader.source(command, 0)
    except (RecursionError, UnicodeError, ValueError) as exc:  # (never expected: unread)
        reader.doubt(f"the command could not be read ({type(exc).__name__})")
    return CommandLine(tuple(reader.commands), tuple(dict.fromkeys(reader.unknown)))


Node = tree_sitter.Node


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
            self.doubt(f"commands nested more than {MAX_NESTING} deep ({show(text)})")
            return
        if len(text) > MAX_LENGTH:
            self.doubt(f"a command longer than {MAX_LENGTH} characters")
            return
        data = text.encode("utf-8", "surrogatepass")
        parser = tree_sitter.Parser(_LANGUAGE)
        root = parser.parse(data).root_node
        joined = _joined(data, root)
        if joined is not None:  # (read again as bash reads it: lines continued)
            data, root = joined, parser.parse(joined).root_node
        if root.has_error:
            self.doubt(f"bash may read {show(text)} otherwise than the parser does")
        stack = [root]
        while stack:
            node = stack.pop()
            self.nodes += 1
            if self.over():
                return
            kind = node.type
            if kind == "expansion" and (m := _DEFAULTED.match(_text(node))):
                self.setting(m.group(1) + "=")  # (${BASH_ENV:=s} sets it)
            if kind == "command":
                self.simple(node, depth)
            elif kind == "variable_assignment":
                self.assignment(node)
            elif kind in ("declaration_command", "unset_command"):
                self.declaration(node)
            elif kind == "test_command":
                self.evaluated(node, "a test")
            elif kind in _ARITHMETIC and (
                kind != "compound_statement" or _text(node)[:2] == "(("
            ):  # ($(( 'a[$(rm f)]' )), (( … )), ${a['$(rm f)']})
                self.evaluated(node, "bash's arithmetic")
            elif kind == "expansion" and _PROMPT.search(_text(node)):
                self.doubt(f"{show(_text(node))} runs the commands in a variable")
            elif kind in ("file_redirect", "herestring_redirect"):
                self.redirect(node)
            elif node.child_count == 0 and node.is_named and kind not in _LITERAL:
                self.unread(node)
            stack.extend(reversed(node.children))

    def assignment(self, node: Node) -> None:
        """``NAME=value``: a setting that names a program, a value or subscript with ``$(``."""
        self.setting(_text(node))
        value = node.child_by_field_name("value")
        kept = None if value is None else _value(value)
        if kept is not None and _HIDDEN.search(kept):  # (x='a[$(rm f)]'; $((x)))
            self.doubt(f"{show(_text(node))} keeps a command bash may run later")
        if value is not None and value.type == "array":  # (a=(['$(rm f)']=1): subscripts)
            self.evaluated(value, "an array's subscript")
        name = node.child_by_field_name("name")
        if name is not None and name.type == "subscript" and _HIDDEN.search(_text(name)):
            self.doubt(f"{show(_text(name))}: bash evaluates the subscript as arithmetic")

    def declaration(self, node: Node) -> None:
        """``export``/``declare``/``local``/``unset``…: each argument is a name or an
        assignment however it is quoted (``export 'BASH_ENV=s'``, ``BASH_E""NV=s``), and a
        subscript in it is arithmetic (``declare 'a[$(rm f)]=1'`` runs ``rm``)."""
        for text, value in _declared(node):
            if value is None:
                continue
            if value.startswith("-") and not value.startswith("--"):
                if "n" in value:
                    self.doubt(f"{show(text)}: a name that refers to another variable")
                continue
            self.setting(value if "=" in value else value + "=")
            if _HIDDEN.search(value):
                self.doubt(f"{show(text)}: bash may evaluate it as arithmetic and run a command")

    def evaluated(self, node: Node, what: str) -> None:
        """A test (``[[ … -eq … ]]``, ``[ -v … ]``): a literal with ``$(`` in it may be
        evaluated as arithmetic (a subscript), which runs the command."""
        stack = list(node.children)
        while stack:
            child = stack.pop()
            if child.type in ("raw_string", "ansi_c_string", "string", "word", "concatenation"):
                value = _value(child)
                if value is not None and _HIDDEN.search(value):
                    self.doubt(f"{what} may evaluate {show(_text(child))} and run a command")
                    return
            if child.type != "do_group":  # (a loop's body: commands, walked as such)
                stack.extend(child.children)

    def unread(self, node: Node) -> None:
        """A piece of text the parser left as text where bash may still find a command
        (backticks inside ``${…}``, a ``<<-`` heredoc): unknown, unless quoted."""
        if not _HIDDEN.search(_ESCAPED.sub("", _text(node))) or _quoted_heredoc(node):
            return  # (<<'EOF': the body is text)
        self.doubt(f"bash may run a command in {show(_text(node))} that was not read")

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
            self.doubt(f"{show(_text(name))} names the program only when it runs")
            return
        self.run(words, _text(written), depth, settings)

    def setting(self, assignment: str) -> None:
        """``NAME=value``: a setting that names a program makes what runs unknown."""
        name = assignment.split("=", 1)[0].split("[", 1)[0].removesuffix("+")
        if sets_program(name):
            self.doubt(f"{show(assignment)} sets what other programs run")

    def redirect(self, node: Node) -> None:
        target = next((c for c in node.named_children if c.type != "file_descriptor"), None)
        if target is None:
            return
        operator = target.prev_sibling
        if (
            operator is not None
            and b"\n"
            in (node.text or b"")[
                operator.end_byte - node.start_byte : target.start_byte - node.start_byte
            ]
        ):  # (bash wants the target on the operator's line; the parser reads the next)
            self.doubt(f"bash may read {show(_text(node))} otherwise than the parser does")
        elif _word(target)[0].startswith(("/dev/tcp/", "/dev/udp/")):
            self.doubt(f"{show(_text(node))} opens a network connection in bash itself")

    def run(
        self, words: Sequence[Word], written: str, depth: int, settings: tuple[str, ...] = ()
    ) -> None:
        """Record one command and follow what it runs in turn."""
        known = next((i for i, (_, ok) in enumerate(words) if not ok), len(words))
        self.kept += len(written) + sum(len(w) + 1 for w, _ in words)
        if self.over():
            return
        self.commands.append(Simple(tuple(w for w, _ in words), known, written, settings))
        follow(self, words, depth)

    def nested(self, word: Word, depth: int, what: str) -> None:
        """Parse the text a command runs as a command (when it is known)."""
        if word[1]:
            self.source(word[0], depth + 1)
        else:
            self.doubt(f"{what} runs {show(word[0])}, known only when it runs")


# -- words -------------------------------------------------------------------------------------

_NOT_WORDS = frozenset({
    "variable_assignment", "file_redirect", "heredoc_redirect", "herestring_redirect",
    "comment",
})  # fmt: skip
_PATTERN = re.compile(r"[*?\[{]")  # a program name bash would expand as a pattern
_LITERAL = frozenset({"raw_string", "ansi_c_string", "comment", "heredoc_start", "heredoc_end"})
_HIDDEN = re.compile(r"`|\$\(")  # where bash would run a command inside a piece of text
_ESCAPED = re.compile(r"\\.", re.DOTALL)
_ARITHMETIC = frozenset(
    {
        "arithmetic_expansion",
        "compound_statement",
        "c_style_for_statement",
        "expansion",
        "subscript",
    }
)  # fmt: skip  (where bash may evaluate a literal's text as arithmetic)
_DEFAULTED = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?=")  # ${NAME:=value} assigns NAME
_PROMPT = re.compile(r"@P\}$")  # ${x@P}: expanded as a prompt, $(…) in it runs
_GLOB = re.compile(r"[*?\[]|\{[^{}]*(?:,|\.\.)[^{}]*\}")  # a pattern, a brace expansion


_CONTINUED = re.compile(rb"(\\+)\n")
_AS_WRITTEN = frozenset({"raw_string", "ansi_c_string", "comment"})


def _joined(data: bytes, root: Node) -> bytes | None:
    """``data`` with its line continuations (a backslash ending a line) taken out where bash
    takes them out: the parser reads ``r\\⏎m`` as two words, bash as ``rm``. None: none."""
    cuts = []
    for m in _CONTINUED.finditer(data):
        at = m.end(1) - 1  # (the last backslash: an even run escapes itself)
        if len(m.group(1)) % 2 == 0:
            continue
        node: Node | None = root.descendant_for_byte_range(at, at + 1)
        while node is not None and node.type not in _AS_WRITTEN and not _quoted_heredoc(node):
            node = node.parent
        if node is None:
            cuts.append(at)
    if not cuts:
        return None
    out, last = bytearray(), 0
    for at in cuts:
        out += data[last:at]
        last = at + 2
    return bytes(out + data[last:])


def _quoted_heredoc(node: Node) -> bool:
    """Whether ``node`` is (in) the body of a heredoc whose delimiter is quoted (text)."""
    if node.type not in ("heredoc_body", "heredoc_content"):
        return False
    redirect = node.parent
    while redirect is not None and redirect.type != "heredoc_redirect":
        redirect = redirect.parent
    if redirect is None:
        return False
    start = next((c for c in redirect.children if c.type == "heredoc_start"), None)
    return start is not None and re.search(r"['\"\\]", _text(start)) is not None


def _declared(node: Node) -> list[tuple[str, str | None]]:
    """A declaration's arguments as bash's words (the parser cuts ``BASH_E""NV=s`` in two):
    each one's text and value (None: known only when it runs)."""
    groups: list[list[Node]] = []
    for child in node.named_children:
        if child.type in _NOT_WORDS and child.type != "variable_assignment":
            continue
        if groups and groups[-1][-1].end_byte == child.start_byte:
            groups[-1].append(child)
        else:
            groups.append([child])
    out: list[tuple[str, str | None]] = []
    for group in groups:
        values = [_text(c) if c.type == "variable_name" else _assigned(c) for c in group]
        text = "".join(_text(c) for c in group)
        out.append((text, None if None in values else "".join(values)))  # type: ignore[arg-type]
    return out


def _assigned(node: Node) -> str | None:
    """The value of one piece of a declaration's word (``NAME=value`` as bash reads it)."""
    if node.type != "variable_assignment":
        return _value(node)
    name, value = node.child_by_field_name("name"), node.child_by_field_name("value")
    kept = "" if value is None else _value(value)
    return None if name is None or kept is None else f"{_text(name)}={kept}"


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogateescape")  # (a cut through a character)


def _word(node: Node) -> Word:
    """A word's value after bash removes quotes, or its text when known only at run time."""
    value = _value(node)
    return (_text(node), False) if value is None else (value, True)


def _value(node: Node) -> str | None:
    kind, text = node.type, _text(node)
    if kind == "command_name":
        return _value(node.children[0]) if node.child_count == 1 else None
    if kind in ("word", "number"):
        if _GLOB.search(_ESCAPED.sub("", text)):
            return None  # (a pattern: the files that match it are known only when it runs)
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
        shape = "".join(_text(c) if c.type == "word" else "''" for c in node.children)
        if _GLOB.search(_ESCAPED.sub("", shape)):
            return None  # ({rm,f}: the parser cuts a brace expansion into pieces)
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
