"""Typed results: what an agent's final answer must be, and how a run gets there.

An output type (``Agent(output_type=...)``, ``Role(output_type=...)``) is a pydantic model, a
dataclass, a TypedDict (``typing_extensions.TypedDict`` before Python 3.12, as pydantic
asks), or a JSON schema (a ``dict`` whose ``type`` is ``object``; role files write it as
``outputSchema:``). :func:`output_spec` turns it into an :class:`OutputSpec`: the
schema, a validator, and the ``final_result`` tool whose parameters are that schema. The run
offers the model that tool; a call to it ends the run (the tool is never executed), and so
does a plain-text answer that is valid JSON for the schema (what a model constrained by a
grammar writes). Any other answer is rejected: the model is shown the validation errors and
tries again, at most :attr:`OutputSpec.retries` times, then
:class:`~retinue.errors.OutputValidationError` ends the run (the history stays valid).

:func:`settle` is the pure step that judges one model answer; :mod:`retinue.engine.loop`
applies it. Every provider that takes tools can honour the final-result tool, so a type that
cannot be made into a schema is refused with one line before the first model call. A
provider that constrains its answer to a schema alongside tools gets the schema that way
instead (:mod:`retinue.llm._structured`: OpenAI Responses' strict ``text.format``).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar, is_typeddict

from retinue.errors import ConfigError, OutputValidationError
from retinue.llm._structured import FINAL_TOOL
from retinue.llm.base import ToolSpec
from retinue.messages import AssistantMessage, Message, ToolResultMessage, UserMessage

if TYPE_CHECKING:
    import pydantic

__all__ = [
    "FINAL_TOOL",
    "Accepted",
    "OutputSpec",
    "Rejected",
    "SubAgentOutput",
    "give_up",
    "output_spec",
    "settle",
]

T = TypeVar("T", default=Any)

_DESCRIPTION = (
    "Give your final answer: its arguments ARE the answer, and calling it ends your turn. "
    "Call it once, after any other tool you need."
)
_ACCEPTED = "Final result accepted."
_NOT_RUN = f"Not run: {FINAL_TOOL} ended the turn in the same step."
_AGAIN = f"Call {FINAL_TOOL} again with arguments that match it."
_MAX_ERRORS = 2000  # characters of validation errors shown to the model


@dataclass(frozen=True, slots=True)
class OutputSpec(Generic[T]):
    """A validated output type: its JSON ``schema``, the ``final_result`` tool, a parser."""

    source: Any  # the type or schema it was made from
    schema: dict[str, Any]
    retries: int = 2
    _adapter: pydantic.TypeAdapter[Any] | None = None  # None: a JSON schema dict

    @property
    def tool(self) -> ToolSpec:
        return ToolSpec(FINAL_TOOL, _DESCRIPTION, self.schema)

    def parse(self, raw: str) -> T:
        """The typed value ``raw`` (JSON) holds; :class:`ValueError` (one line per problem)."""
        if self._adapter is not None:
            import pydantic

            try:
                return self._adapter.validate_json(raw or "{}")
            except pydantic.ValidationError as exc:
                raise ValueError(_pydantic_errors(exc)) from None
        try:
            value = json.loads(raw or "{}")
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON: {exc}") from None
        errors = _schema_errors(self.schema, value)
        if errors:
            raise ValueError(errors)
        return value

    def dump(self, value: T) -> str:
        """``value`` as compact JSON (what a parent model or a stored history reads)."""
        if self._adapter is not None:
            return self._adapter.dump_json(value).decode()
        return json.dumps(value, ensure_ascii=False)

    def jsonable(self, value: T) -> Any:
        """``value`` as plain JSON data (for events and HTTP surfaces)."""
        return json.loads(self.dump(value))


def output_spec(output_type: Any, *, retries: int = 2) -> OutputSpec[Any]:
    """The spec of ``output_type``; :class:`~retinue.errors.ConfigError` (one line) for a
    type no path can honour."""
    if isinstance(output_type, OutputSpec):
        return output_type  # type: ignore[return-value]
    if isinstance(output_type, dict):
        return OutputSpec(output_type, _checked_schema(output_type), retries)  # type: ignore[arg-type]
    if not isinstance(output_type, type) or not _is_structured(output_type):
        shown = output_type.__name__ if isinstance(output_type, type) else repr(output_type)
        raise ConfigError(
            f"output_type {shown}: use a pydantic model, a dataclass, a TypedDict "
            "or a JSON schema (a dict with type 'object')"
        )
    import pydantic

    try:
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(output_type)
        schema = adapter.json_schema()
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError) as exc:
        first = str(exc).splitlines()[0]
        raise ConfigError(f"output_type {output_type.__name__}: {first}") from None
    return OutputSpec(output_type, schema, retries, adapter)


def _is_structured(cls: type) -> bool:
    import pydantic

    return issubclass(cls, pydantic.BaseModel) or dataclasses.is_dataclass(cls) or is_typeddict(cls)


def _checked_schema(schema: dict[str, Any]) -> dict[str, Any]:
    if schema.get("type") != "object":
        raise ConfigError('output schema: its top level must have "type": "object"')
    import jsonschema
    from jsonschema.validators import validator_for

    try:
        validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ConfigError(f"output schema is not a valid JSON schema: {exc.message}") from None
    return schema


def _schema_errors(schema: dict[str, Any], value: Any) -> str:
    from jsonschema.validators import validator_for

    validator = validator_for(schema)(schema)
    found = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    lines = [f"{'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in found]
    return "\n".join(lines)[:_MAX_ERRORS]


def _pydantic_errors(exc: pydantic.ValidationError) -> str:
    lines = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "(top)"
        lines.append(f"{where}: {err['msg']}")
    return "\n".join(lines)[:_MAX_ERRORS]


@dataclass(frozen=True, slots=True)
class SubAgentOutput:
    """A sub-agent's typed answer, as Python gets it: which agent, of what role, and the
    value (its role's output type)."""

    agent_id: str
    role: str
    output: Any


@dataclass(frozen=True, slots=True)
class Accepted:
    """The answer is the output: ``value`` (typed), ``text`` (its JSON), and the messages
    that close the step (the final call's result and an assistant message holding ``text``)."""

    value: Any
    text: str
    closing: tuple[Message, ...] = ()


@dataclass(frozen=True, slots=True)
class Rejected:
    """The answer is not valid: ``feedback`` (the messages that show the model why) and
    ``errors`` (the same, for :class:`~retinue.errors.OutputValidationError`)."""

    feedback: tuple[Message, ...]
    errors: str


def settle(spec: OutputSpec[Any], message: AssistantMessage) -> Accepted | Rejected | None:
    """Judge one model answer against ``spec``: ``None`` when it asks for other tools only
    (the run goes on), :class:`Accepted` or :class:`Rejected` otherwise."""
    finals = [c for c in message.tool_calls if c.name == FINAL_TOOL]
    if finals:
        final = finals[0]
        try:
            value = spec.parse(final.arguments)
        except ValueError as exc:
            errors = str(exc)
            note = f"Error: the answer does not match the schema:\n{errors}\n{_AGAIN}"
            results = tuple(
                ToolResultMessage(c.id, c.name, note if c is final else _NOT_RUN, True)
                for c in message.tool_calls
            )
            return Rejected(results, errors)
        text = spec.dump(value)
        results = tuple(
            ToolResultMessage(c.id, c.name, _ACCEPTED if c is final else _NOT_RUN, c is not final)
            for c in message.tool_calls
        )
        return Accepted(value, text, (*results, AssistantMessage(text)))
    if message.tool_calls:
        return None
    try:
        value = spec.parse(_unfenced(message.content))
    except ValueError as exc:
        errors = str(exc)
        note = (
            f"Your final answer must match the output schema: call the {FINAL_TOOL} tool "
            f"with it (or, if you have no such tool, answer with the JSON alone). What you "
            f"wrote does not:\n{errors}"
        )
        return Rejected((UserMessage(note),), errors)
    return Accepted(value, spec.dump(value))


def _unfenced(text: str) -> str:
    """A JSON answer without the Markdown fence a model may put around it."""
    body = text.strip()
    if body.startswith("```") and body.endswith("```"):
        body = body[3:-3]
        body = body.split("\n", 1)[1] if "\n" in body else body
    return body.strip()


def give_up(spec: OutputSpec[Any], rejected: Rejected) -> OutputValidationError:
    """The error that ends a run whose answers kept failing validation."""
    first = rejected.errors.splitlines()[0] if rejected.errors else "no answer"
    tries = spec.retries + 1
    return OutputValidationError(
        f"the model's answer did not match the output type after {tries} tries: {first}",
        errors=rejected.errors,
    )
