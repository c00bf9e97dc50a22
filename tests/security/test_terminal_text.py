"""``for_terminal``, the one function that makes untrusted text safe for a terminal, and the
ways the terminal program prints with it (:mod:`retinue.cli.term`): every escape sequence,
C1 and other control character and bidi override is shown, never sent; newlines and tabs stay;
a sequence cut across streamed pieces is inert in each piece."""

from __future__ import annotations

import io
import itertools
import logging
import subprocess
import sys

import pytest
from rich.markdown import Markdown
from rich.text import Text

from retinue.cli.term import LineDiscipline, console, echo, escape, route_logs, write_data
from retinue.safe_text import for_terminal

TITLE = "\x1b]0;pwned\x07"  # OSC 0: sets the window title
CLEAR = "\x1b[2J"  # CSI 2J: clears the screen

NASTY = {
    "CSI": ("\x1b[2J\x1b[H", "␛[2J␛[H"),
    "SGR conceal": ("\x1b[8msecret\x1b[0m", "␛[8msecret␛[0m"),
    "OSC title, BEL": (TITLE, "␛]0;pwned␇"),
    "OSC title, ST": ("\x1b]2;pwned\x1b\\", "␛]2;pwned␛\\"),
    "OSC 8 hyperlink": (
        "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\",
        "␛]8;;https://evil.example␛\\click␛]8;;␛\\",
    ),
    "OSC 52 clipboard": ("\x1b]52;c;cm0gLXJmIH4=\x07", "␛]52;c;cm0gLXJmIH4=␇"),
    "DCS": ("\x1bP+q544e\x1b\\", "␛P+q544e␛\\"),
    "APC": ("\x1b_payload\x1b\\", "␛_payload␛\\"),
    "PM": ("\x1b^payload\x1b\\", "␛^payload␛\\"),
    "SOS": ("\x1bXpayload\x1b\\", "␛Xpayload␛\\"),
    "8-bit CSI": ("\x9b2J", "<U+009B>2J"),
    "8-bit OSC, ST": ("\x9d0;pwned\x9c", "<U+009D>0;pwned<U+009C>"),
    "bare ESC": ("a\x1bb", "a␛b"),
    "BEL": ("ding\x07", "ding␇"),
    "backspace": ("safe\x08\x08\x08\x08evil", "safe␈␈␈␈evil"),
    "carriage return": ("rm -rf ~\rls -l   ", "rm -rf ~␍ls -l   "),
    "NUL and DEL": ("a\x00b\x7f", "a␀b␡"),
    "vertical tab, form feed": ("a\x0bb\x0cc", "a␋b␌c"),
    "NEL": ("a\x85b", "a<U+0085>b"),
    "right-to-left override": ("file\u202etxt.exe", "file<U+202E>txt.exe"),
    "bidi isolates": ("\u2066a\u2067b\u2068c\u2069", "<U+2066>a<U+2067>b<U+2068>c<U+2069>"),
    "bidi embeddings": ("\u202aa\u202bb\u202cc\u202dd", "<U+202A>a<U+202B>b<U+202C>c<U+202D>d"),
    "lone surrogate": ("a\ud83db", "a<U+D83D>b"),
}


@pytest.mark.parametrize("raw,shown", NASTY.values(), ids=list(NASTY))
def test_every_control_character_is_shown_not_sent(raw: str, shown: str) -> None:
    assert for_terminal(raw) == shown
    assert all(c.isprintable() or c in "\n\t" for c in for_terminal(raw))


def test_text_a_terminal_does_not_act_on_is_kept_as_it_is() -> None:
    text = "Hello, wörld — 你好 🙂👩‍💻 [bold]x[/] \\ ␛ is a picture, not ESC\n\tindented\n"
    assert for_terminal(text) == text
    assert for_terminal("عربي\u200f and hebrew \u05e9\u05dc\u05d5\u05dd") == (
        "عربي\u200f and hebrew \u05e9\u05dc\u05d5\u05dd"  # marks kept: they override nothing
    )


def test_windows_line_ends_are_line_ends() -> None:
    assert for_terminal("one\r\ntwo\r\n") == "one\ntwo\n"
    assert for_terminal("a\r\r\nb") == "a␍\nb"


ACTED_ON = {
    *(chr(c) for c in range(0x20) if chr(c) not in "\n\t"),
    *(chr(c) for c in range(0x7F, 0xA0)),
    *"\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069",
}


def test_no_code_point_a_terminal_acts_on_comes_out() -> None:
    everything = "".join(chr(c) for c in range(0x10000))
    shown = for_terminal(everything)
    assert not ACTED_ON & set(shown)
    assert shown.encode("utf-8")  # (no lone surrogate left to stop the output)


def test_a_sequence_cut_anywhere_is_inert_in_every_piece() -> None:
    text = f"before {TITLE}{CLEAR} \x9b2J after\r\n"
    for cut in range(len(text) + 1):
        pieces = [for_terminal(text[:cut]), for_terminal(text[cut:])]
        assert not any(c in "".join(pieces) for c in "\x1b\x07\x9b\r")
        if text[cut - 1 : cut + 1] != "\r\n":
            assert "".join(pieces) == for_terminal(text)


def test_streamed_pieces_show_the_same_text_as_the_whole() -> None:
    text = f"a {TITLE}b{CLEAR}c \u202ed\r\ne\r"
    whole = io.StringIO()
    LineDiscipline(whole).text(text)
    for size in (1, 2, 3, 5):
        out = io.StringIO()
        lines = LineDiscipline(out)
        for i in range(0, len(text), size):
            lines.text(text[i : i + size])
        lines.end_line()
        assert out.getvalue() == "a ␛]0;pwned␇b␛[2Jc <U+202E>d\ne␍\n"
    assert "\x1b" not in whole.getvalue()


def test_streamed_text_wrapped_at_a_width_is_shown_too() -> None:
    out = io.StringIO()
    lines = LineDiscipline(out, wrap=True, width=lambda: 20)
    for piece in ("word \x1b]0;pw", "ned\x07 more\x1b[2", "J words"):
        lines.text(piece)
    lines.end_line()
    assert "\x1b" not in out.getvalue() and "\x07" not in out.getvalue()
    assert "␛]0;pwned␇" in out.getvalue()


def test_escape_shows_controls_and_keeps_markup_as_text() -> None:
    assert escape(f"[bold]{TITLE}[/]") == "\\[bold]␛]0;pwned␇\\[/]"


@pytest.fixture(autouse=True)
def _styled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # consoles style as on a terminal (their own ESCs)


def terminal_output(*renderables: object) -> str:
    out = io.StringIO()
    shown = console(file=out)
    for item in renderables:
        shown.print(item)
    return out.getvalue()


@pytest.mark.parametrize(
    "renderable",
    [
        Text(f"{TITLE}{CLEAR}plain", style="bold red"),
        Markdown(f"# {TITLE}\n\n*{CLEAR}*\n\n```\n{TITLE}\n```\n"),
        f"[bold]{TITLE}{CLEAR}[/]",
    ],
    ids=["Text", "Markdown", "markup"],
)
def test_a_console_never_writes_a_control_sequence_it_was_given(renderable: object) -> None:
    written = terminal_output(renderable)
    assert "\x1b[1" in written  # its own styles (bold) are there
    assert "\x1b]" not in written and CLEAR not in written and "\x07" not in written
    assert "␛]0;pwned" in written and "␛[2J" in written


def test_a_console_writes_no_hyperlink() -> None:
    written = terminal_output(
        "[link=https://evil.example]https://good.example[/link]",
        Markdown("[https://good.example](https://evil.example)", hyperlinks=True),
    )
    assert "\x1b]8" not in written
    assert "https://good.example" in written


def test_echo_and_write_data(capsys: pytest.CaptureFixture[str]) -> None:
    echo(f"answer {TITLE}")
    echo(f"question {CLEAR}", err=True)
    out, err = capsys.readouterr()
    assert out == "answer ␛]0;pwned␇\n" and err == "question ␛[2J\n"
    exported = io.StringIO()
    write_data(exported, '{"text": "\u202e\x9b"}\n')  # not a terminal: the data as it is
    assert exported.getvalue() == '{"text": "\u202e\x9b"}\n'


def test_every_c0_and_c1_character_but_newline_and_tab_is_replaced() -> None:
    for code in itertools.chain(range(0x20), range(0x7F, 0xA0)):
        char = chr(code)
        assert (for_terminal(char) == char) == (char in "\n\t"), hex(code)


def test_warnings_are_shown_too_retinues_and_other_libraries() -> None:
    out = io.StringIO()
    ours = logging.getLogger("retinue")
    saved, handlers, propagate = logging.lastResort, ours.handlers[:], ours.propagate
    try:
        route_logs(console(file=out))
        logging.getLogger("retinue.somewhere").warning("a tool said %s", TITLE)
        library = logging.getLogger("some.library")
        library.propagate = False  # no handler anywhere: Python's last resort prints it
        library.warning("a library said %s", CLEAR)
    finally:
        logging.lastResort, ours.handlers[:], ours.propagate = saved, handlers, propagate
    assert "a tool said ␛]0;pwned␇" in out.getvalue()
    assert "a library said ␛[2J" in out.getvalue()
    assert "\x1b]" not in out.getvalue() and CLEAR not in out.getvalue()


def test_an_uncaught_exceptions_report_is_shown_too() -> None:
    crash = (
        "from retinue.cli.term import safe_tracebacks; safe_tracebacks(); "
        f"raise ValueError({TITLE!r} + 'model text')"
    )
    proc = subprocess.run([sys.executable, "-c", crash], capture_output=True, timeout=30)
    assert proc.returncode == 1
    assert b"ValueError: \xe2\x90\x9b]0;pwned" in proc.stderr  # ␛ in UTF-8
    assert b"\x1b" not in proc.stderr and b"\x07" not in proc.stderr
