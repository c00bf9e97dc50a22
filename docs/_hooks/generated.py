"""MkDocs hooks: the reference pages that are generated from the code at build time.

A page holds a marker line, replaced when the site is built:

- ``<!-- generated: cli -->``: every ``retinue`` command, from the typer app itself (its
  usage, help and options, as ``retinue COMMAND --help`` would print them);
- ``<!-- generated: config -->``: every ``config.toml`` key, its type and default, from the
  strict pydantic model that checks the file and the settings' defaults;
- ``<!-- generated: events -->``: every event kind, its class and typed fields, from
  ``retinue/events.py``;
- ``<!-- generated: role-fields -->``: every front-matter key a role file may set;
- ``<!-- generated: http -->``: every HTTP route of ``retinue serve``, from FastAPI's OpenAPI
  schema of an app built as the service builds it (a temporary data directory, a scripted
  model); the schema itself is written beside the page as ``openapi.json``.

After the build, ``llms.txt`` (the site's pages, by section, each with its first sentence) and
``llms-full.txt`` (every page's Markdown, generated parts included) are written at the root
of the site, as the llms.txt proposal describes, for coding agents.
"""

from __future__ import annotations

import json
import tempfile
import typing
from pathlib import Path
from typing import Any

import typer

MARKER = "<!-- generated: {} -->"


def _text_md(text: str) -> str:
    """Help text as Markdown text: ``<home>`` is not an HTML tag."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    """Text for inline code in a table cell (Markdown does not unescape inside code)."""
    return " ".join(text.split()).replace("|", "\\|")


def _cell(text: str) -> str:
    return _text_md(" ".join(text.split())).replace("|", "\\|")


def _options(command: Any, ctx: Any) -> list[str]:
    rows = []
    for param in command.get_params(ctx):
        if param.param_type_name == "option":
            names = ", ".join(f"`{n}`" for n in (*param.opts, *param.secondary_opts))
            help_text = param.help or ""
        else:
            names = f"`{(param.name or '').upper()}`"
            help_text = getattr(param, "help", None) or ""
        rows.append(f"| {names} | {_cell(help_text)} |")
    if not rows:
        return []
    return ["| Option or argument | Meaning |", "|---|---|", *rows, ""]


def _command(command: Any, path: list[str], parent: Any) -> list[str]:
    ctx = command.context_class(command, info_name=path[-1], parent=parent)
    usage = " ".join(command.collect_usage_pieces(ctx))
    level = "#" * min(len(path) + 1, 4)
    out = [f"{level} `{' '.join(path)}`", "", f"```text\n{' '.join(path)} {usage}\n```", ""]
    if command.help:
        out += [_text_md(command.help.replace("\b\n", "").strip()), ""]
    out += _options(command, ctx)
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                out += _command(sub, [*path, name], ctx)
    return out


def cli_markdown() -> str:
    """The reference of every ``retinue`` command, generated from the typer app."""
    from retinue.cli.app import app

    return "\n".join(_command(typer.main.get_command(app), ["retinue"], None))


def openapi_schema() -> dict[str, Any]:
    """FastAPI's OpenAPI schema of the service, built as ``retinue serve`` builds it."""
    from retinue.config import Settings
    from retinue.runtime import Runtime
    from retinue.server import create_app
    from retinue.server.security import Security
    from retinue.testing import ScriptedModel

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.load(home=Path(tmp), workspace=Path(tmp))
        model = ScriptedModel(responder=lambda _m, _t: "ok")
        runtime = Runtime.create(
            settings, model=model, model_for=lambda _s: model, with_memory=False
        )
        return create_app(runtime, Security.build("docs")).openapi()


def http_markdown(schema: dict[str, Any]) -> str:
    """A table of the service's routes: method, path and summary, grouped by path."""
    out = ["| Method | Path | What it does |", "|---|---|---|"]
    for path, operations in schema["paths"].items():
        for method, op in operations.items():
            summary = op.get("summary") or ""
            text = (op.get("description") or "").strip().split("\n\n")[0]
            what = _cell(text or summary)
            out.append(f"| `{method.upper()}` | `{_code(path)}` | {what} |")
    return "\n".join(out) + "\n"


def config_markdown() -> str:
    """A table of the keys of ``config.toml``: type (as checked) and default."""
    import dataclasses

    from retinue.config import FileSettings, Settings

    defaults = {f.name: f for f in dataclasses.fields(Settings)}
    out = ["| Key | Type | Limits | Default |", "|---|---|---|---|"]
    for name, field in FileSettings.model_fields.items():
        spec = defaults[name]
        kind = str(spec.type).replace(" | None", "")
        limits = _limits(field.annotation)
        if spec.default is not dataclasses.MISSING:
            default = f"`{spec.default!r}`"
        else:
            default = "empty" if name != "model_aliases" else "the built-in aliases"
        out.append(f"| `{name}` | `{_code(kind)}` | {limits} | {default} |")
    return "\n".join(out) + "\n"


def _limits(annotation: Any) -> str:
    """The bounds pydantic checks on a setting, e.g. ``≥ 0, ≤ 32`` or a pattern."""
    import annotated_types

    found = []
    for arg in typing.get_args(annotation) or ():
        for meta in getattr(arg, "__metadata__", ()):
            for item in getattr(meta, "metadata", [meta]):
                if isinstance(item, annotated_types.Ge):
                    found.append(f"≥ {item.ge}")
                elif isinstance(item, annotated_types.Le):
                    found.append(f"≤ {item.le}")
                elif isinstance(item, annotated_types.MinLen):
                    found.append(f"length ≥ {item.min_length}")
                elif isinstance(item, annotated_types.MaxLen):
                    found.append(f"length ≤ {item.max_length}")
                elif getattr(item, "pattern", None):
                    found.append(f"matches `{_code(item.pattern)}`")
    return ", ".join(found)


def events_markdown() -> str:
    """A table of the event kinds: each class of ``retinue/events.py``, its fields (with
    their types) and its docstring."""
    import dataclasses
    import inspect

    from retinue import events

    base = {f.name for f in dataclasses.fields(events.Event)}
    out = ["| Kind | Class | Fields | What it says |", "|---|---|---|---|"]
    for cls in events.EVENT_CLASSES:
        own = [f for f in dataclasses.fields(cls) if f.name not in base]
        kind = next(f.default for f in dataclasses.fields(cls) if f.name == "kind")
        names = ", ".join(f"`{f.name}: {_code(str(f.type))}`" for f in own)
        doc = _rst_md(inspect.getdoc(cls) or "")
        out.append(f"| `{kind}` | `{cls.__name__}` | {names} | {_cell(doc)} |")
    return "\n".join(out) + "\n"


def _rst_md(text: str) -> str:
    """A docstring's reST roles and literals as Markdown code: ``:class:`~a.B``` -> `B`."""
    import re

    def role(m: re.Match[str]) -> str:
        target = m.group(2)
        return f"`{target.rpartition('.')[2] if m.group(1) else target}`"

    return re.sub(r":\w+:`(~?)([^`]+)`", role, text).replace("``", "`")


def role_fields_markdown() -> str:
    """The front-matter keys a role file may set, as the role parser knows them."""
    from retinue.subagents import roles

    keys = sorted(roles._OWN_KEYS, key=str.lower)  # pyright: ignore[reportPrivateUsage]
    settings = set(roles.ROLE_SETTING_KEYS)
    out = ["| Key | Kind |", "|---|---|"]
    for key in keys:
        kind = "model setting" if key in settings else "role"
        out.append(f"| `{key}` | {kind} |")
    return "\n".join(out) + "\n"


_schema: dict[str, Any] = {}
_pages: dict[str, tuple[str, str]] = {}  # url -> (title, markdown as rendered)


def _summary(markdown: str) -> str:
    """The first sentence of a page's first paragraph (headings and code left out)."""
    for para in markdown.split("\n\n"):
        text = " ".join(para.split())
        if text and not text.startswith(("#", "```", "<!--", ":::", "|", "--8<--")):
            first = text.split(". ")[0].rstrip(".:")
            return (first if len(first) <= 240 else first[:239] + "…") + "."
    return ""


def llms_txt(config: Any, nav: Any) -> tuple[str, str]:
    """``llms.txt`` (an index of the pages) and ``llms-full.txt`` (all of them)."""
    short = [f"# {config['site_name']}", "", f"> {config['site_description']}", ""]
    full = []
    for item in nav.items:
        pages = item.children if item.children else [item]
        short += [f"## {item.title}", ""]
        for page in pages:
            url = page.file.url if hasattr(page, "file") else ""
            title, markdown = _pages.get(url, (page.title, ""))
            short.append(f"- [{title}]({url}): {_summary(markdown)}")
            full.append(f"<!-- {url} -->\n{markdown.strip()}\n")
        short.append("")
    return "\n".join(short), "\n".join(full)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if MARKER.format("cli") in markdown:
        markdown = markdown.replace(MARKER.format("cli"), cli_markdown())
    for name, make in (
        ("config", config_markdown),
        ("events", events_markdown),
        ("role-fields", role_fields_markdown),
    ):
        if MARKER.format(name) in markdown:
            markdown = markdown.replace(MARKER.format(name), make())
    if MARKER.format("http") in markdown:
        _schema.update(openapi_schema())
        markdown = markdown.replace(MARKER.format("http"), http_markdown(_schema))
    _pages[page.file.url] = (page.title or "", markdown)
    return markdown


_nav: list[Any] = []
GENERATED_FILES = ("llms.txt", "llms-full.txt", "reference/openapi.json")


def on_files(files: Any, config: Any, **_: Any) -> Any:
    """Placeholders for the files written after the build, so that links to them resolve."""
    from mkdocs.structure.files import File

    for name in GENERATED_FILES:
        files.append(File.generated(config, name, content=""))
    return files


def on_nav(nav: Any, **_: Any) -> Any:
    _nav[:] = [nav]
    return nav


def on_post_build(config: Any, **_: Any) -> None:
    site = Path(config["site_dir"])
    short, full = llms_txt(config, _nav[0])
    (site / "llms.txt").write_text(short, encoding="utf-8")
    (site / "llms-full.txt").write_text(full, encoding="utf-8")
    if _schema:
        target = Path(config["site_dir"]) / "reference" / "openapi.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(_schema, indent=1), encoding="utf-8")
