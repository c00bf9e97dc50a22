"""Untrusted text made safe for a terminal: :func:`for_terminal`, the one function every
printer of a model's, a tool's, a hook's, a file's or a remote service's text goes through.

A terminal acts on control characters in what it is sent. ESC starts escape sequences: CSI
(``ESC [``: clear the screen, move the cursor, hide text), OSC (``ESC ]``: set the window
title, write the clipboard with OSC 52, a hyperlink whose target differs from its text with
OSC 8), DCS, APC, PM and SOS (``ESC P``, ``ESC _``, ``ESC ^``, ``ESC X``). The 8-bit C1
characters U+0080-U+009F do the same without ESC on terminals that honour them (U+009B is
CSI, U+009D is OSC). BEL rings, backspace and a lone carriage return overwrite what is on the
line, and the Unicode bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069)
reorder what a person reads (``rm -rf ~`` shown as something else).

What :func:`for_terminal` does, one character at a time:

* newline and tab are kept, and a carriage return just before a newline (a Windows line
  end) is dropped;
* every other C0 character and DEL is shown as its Unicode control picture: ESC as ``␛``,
  BEL as ``␇``, backspace as ``␈``, a lone carriage return as ``␍`` (U+2400-U+2421);
* a C1 character, a bidi control or a lone surrogate (unprintable, it would stop the
  output with an encoding error) is shown as ``<U+009B>``.

Nothing is dropped silently: shown, an escape sequence is inert (the terminal acts on the
ESC or C1 character, not on the ``]0;title`` that follows it, which is plain text then),
and the person reading sees that the text carried one. Because the work is per character,
a sequence cut across two streamed pieces is made inert in each piece as in the whole:
``for_terminal(a + b) == for_terminal(a) + for_terminal(b)``, except for a carriage return
that ends ``a`` while ``b`` starts with a newline (shown as ``␍`` then; a streaming printer
holds such a carriage return back until the next piece, see
:class:`retinue.cli.term.LineDiscipline`).

It does not escape Rich markup (``[bold]``): a printer that uses markup escapes the result
too (:func:`retinue.cli.term.escape` does both).
"""

from __future__ import annotations

__all__ = ["for_terminal"]


def _table() -> dict[int, str]:
    shown = {code: chr(0x2400 + code) for code in range(0x20)}  # ␀ … ␟
    del shown[ord("\n")], shown[ord("\t")]
    shown[0x7F] = "\u2421"  # ␡
    others = [*range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
    others += range(0xD800, 0xE000)  # lone surrogates
    shown.update({code: f"<U+{code:04X}>" for code in others})
    return shown


_SHOWN = _table()


def for_terminal(text: str) -> str:
    """``text`` with every character a terminal acts on shown instead (see the module text);
    newlines and tabs kept."""
    if text.isprintable():  # the usual case: nothing to do
        return text
    return text.replace("\r\n", "\n").translate(_SHOWN)
