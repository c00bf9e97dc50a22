"""Typed events: one class per kind, built by ``emit`` from the data the code base gives, with
the wire format (``to_dict``) and the dict view (``data``) as they were."""

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path

import pytest

from retinue import events
from retinue.events import (
    EVENT_CLASSES,
    ApprovalRequested,
    Event,
    ModelCallFinished,
    Notice,
    RunFinished,
    SessionChanged,
    TextDelta,
    emit,
    make_event,
)
from retinue.policy.approvals import ApprovalRequest

SRC = Path(events.__file__).parent
BASE = {"kind", "agent_id", "data", "at"}


def own_fields(cls: type[Event]) -> dict[str, dataclasses.Field[object]]:
    return {f.name: f for f in dataclasses.fields(cls) if f.name not in BASE}


def kind_of(cls: type[Event]) -> str:
    return next(f.default for f in dataclasses.fields(cls) if f.name == "kind")  # type: ignore[return-value]


def test_every_kind_constant_has_its_class() -> None:
    constants = {
        v for k, v in vars(events).items() if k.isupper() and isinstance(v, str) and k != "SESSION"
    } | {events.SESSION}
    assert {kind_of(c) for c in EVENT_CLASSES} == constants
    for cls in EVENT_CLASSES:
        assert type(make_event(kind_of(cls), "main", {})) in (cls, Event)


def test_emit_builds_the_class_and_keeps_the_wire_format() -> None:
    got: list[Event] = []
    data = {"input_tokens": 12, "output_tokens": 3, "seconds": 0.5, "cost_usd": None}
    emit(got.append, events.MODEL_CALLED, "main/researcher", **data)
    [event] = got
    assert isinstance(event, ModelCallFinished)
    assert (event.input_tokens, event.output_tokens, event.cost_usd) == (12, 3, None)
    assert event.purpose is None and event.path == ("main", "researcher")
    # the dict view and the wire hold what was given, in its order, and nothing more
    assert event.data == data and list(event.data) == list(data)
    wire = event.to_dict()
    assert list(wire) == ["kind", "agent_id", "at", *data]
    assert wire["kind"] == "model_called" and wire["agent_id"] == "main/researcher"


def test_extra_data_stays_reachable() -> None:
    event = make_event("notice", "main", {"text": "careful", "source": "hooks"})
    assert isinstance(event, Notice) and event.text == "careful"
    assert event.extra == {"source": "hooks"}
    assert event.to_dict()["source"] == "hooks"


def test_a_kind_of_ones_own_and_data_that_does_not_fit_make_a_plain_event() -> None:
    own = make_event("deployed", "main", {"where": "prod"})
    assert type(own) is Event and own.data == {"where": "prod"} and own.extra == {"where": "prod"}
    lacking = make_event("tool_started", "main", {"name": "Read"})  # no call_id
    assert type(lacking) is Event and lacking.kind == "tool_started"
    assert lacking.data == {"name": "Read"}


def test_an_event_built_in_python_has_its_dict_view() -> None:
    delta = TextDelta("main/a", text="hi")
    assert delta.kind == "text_delta" and delta.data == {"text": "hi"}
    assert delta.to_dict() == {"kind": "text_delta", "agent_id": "main/a", "at": delta.at,
                               "text": "hi"}  # fmt: skip
    asking = SessionChanged("main/a", action="asking", question="Why?")
    assert asking.data["question"] == "Why?" and asking.data["turns"] is None
    assert asking.data["conversation_id"] == "main/a"  # the old key, for one release
    with pytest.raises(dataclasses.FrozenInstanceError):
        delta.text = "changed"  # type: ignore[misc]


def test_the_old_positional_event_still_builds() -> None:
    event = Event("run_started", "conv-a", {"role": "main"})
    assert event.kind == "run_started" and event.data == {"role": "main"}
    assert Event("run_started", "conv-b").data == {}


def test_an_approval_request_makes_its_typed_event() -> None:
    request = ApprovalRequest("r1", "main/ops", "ops", 1, "Bash", "ls", "asks", "Bash(ls)",
                              call_id="c1", digest="d")  # fmt: skip
    event = make_event(events.APPROVAL_REQUESTED, request.agent_id, request.event_data())
    assert isinstance(event, ApprovalRequested)
    assert (event.id, event.tool, event.depth, event.call_id) == ("r1", "Bash", 1, "c1")
    assert event.extra == {}  # every field of the request has its own


def test_a_typed_answer_reaches_run_finished() -> None:
    event = make_event("run_finished", "main/a#1", {
        "stop_reason": "final", "usage": {"input_tokens": 1, "output_tokens": 2, "requests": 1},
        "role": "analyst", "output": {"claim": "x"},
    })  # fmt: skip
    assert isinstance(event, RunFinished)
    assert event.output == {"claim": "x"} and event.usage["requests"] == 1


def emitted_kinds() -> list[tuple[str, str, set[str], bool]]:
    """Every ``emit(sink, KIND, agent, key=...)`` in the package: where, the kind, the
    keys, and whether more come from a ``**mapping``."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "emit"):
                continue
            if len(node.args) < 3 or not isinstance(node.args[1], ast.Name):
                continue  # (a local helper of the same name, in a model's wire code)
            keys = {k.arg for k in node.keywords if k.arg is not None}
            splat = any(k.arg is None for k in node.keywords)
            module = importlib.import_module(_module_name(path))
            kind = getattr(module, node.args[1].id)  # (the kind's constant, where it is used)
            found.append((f"{path.relative_to(SRC)}:{node.lineno}", kind, keys, splat))
    return found


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_emitter_in_the_code_base_fits_its_class() -> None:
    """What the code emits has a typed field for every key, and every required field."""
    found = emitted_kinds()
    assert len(found) > 20, found
    for where, kind, keys, splat in found:
        cls = next((c for c in EVENT_CLASSES if kind_of(c) == kind), None)
        assert cls is not None, f"{where}: {kind} has no event class"
        fields = own_fields(cls)
        assert keys <= set(fields), f"{where}: {sorted(keys - set(fields))} not in {cls.__name__}"
        missing = {
            n for n, f in fields.items()
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        } - keys  # fmt: skip
        assert splat or not missing, f"{where}: {cls.__name__} needs {sorted(missing)}"
