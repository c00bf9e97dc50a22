"""The run loop: ask the model, run the tools it asks for, repeat until it answers.

A turn is :func:`run_turn` ``(config, state)``: what configures the run
(:class:`~retinue.engine.config.RunConfig`) and the history it extends in place
(:class:`~retinue.engine.config.RunState`). Each model answer is interpreted by the pure
function :func:`next_step` into an explicit next step — :class:`Final` or :class:`RunTools` —
so the decision is testable without I/O.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace

from retinue import _tracer
from retinue.engine.config import RunConfig, RunOutput, RunState
from retinue.engine.observer import ModelCallSpan, RunTracer
from retinue.engine.output import Rejected, give_up, settle
from retinue.engine.pause import close_open_calls, open_calls
from retinue.engine.repeats import Repeats, listen_for_stop, refusal
from retinue.errors import ContextTooLongError
from retinue.events import (
    MODEL_CALLED,
    MODEL_STARTED,
    RUN_FINISHED,
    RUN_STARTED,
    TEXT_DELTA,
    EventSink,
    emit,
)
from retinue.llm.base import ModelResponse, TextCallback, ToolSpec
from retinue.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from retinue.telemetry.prices import cost_usd

__all__ = [
    "Final",
    "RunTools",
    "close_pending_calls",
    "next_step",
    "no_answer",
    "run",
    "run_pending_calls",
    "run_turn",
]


@dataclass(frozen=True, slots=True)
class Final:
    content: str
    waiting_for_input: bool


@dataclass(frozen=True, slots=True)
class RunTools:
    calls: tuple[ToolCall, ...]


def next_step(message: AssistantMessage, *, interactive: bool) -> Final | RunTools:
    """What to do after the model said ``message``."""
    if message.tool_calls:
        return RunTools(message.tool_calls)
    return Final(message.content, waiting_for_input=interactive)


def no_answer(tools_used: list[str]) -> str:
    """What a run reports instead of an empty final answer: what the agent did."""
    if not tools_used:
        return "(The model ended its turn without an answer.)"
    names = ", ".join(dict.fromkeys(tools_used))
    return f"(The model ended its turn without an answer, after using: {names}.)"


async def run_turn(config: RunConfig, state: RunState | None = None) -> RunOutput:
    """Run one turn of one agent on ``state`` to its answer, its pause (interactive), or
    ``max_iterations`` (the run loop; ``run`` is its deprecated name, for one release).
    Without a state it runs on the config's own history (``config.messages``: the form
    before :class:`~retinue.engine.config.RunState`, kept for one release).

    A cancelled run closes the conversation cleanly (every pending tool call gets a
    "cancelled" result, so the history stays valid for a later turn) and re-raises
    :class:`asyncio.CancelledError`.
    """
    ctx = config.context
    messages = config.messages if state is None else state.messages
    emit(
        ctx.events,
        RUN_STARTED,
        ctx.agent_id,
        role=ctx.role,
        parent_id=ctx.parent_id,
        depth=ctx.depth,
    )
    # Made on first use (a run without tools makes neither): what a run holds while its
    # model call is in flight is what the cyclic collector walks, thousands of runs at once.
    usage, tools_used, last_input = _NO_USAGE, _NO_TOOLS, 0
    repeats: Repeats | None = None
    stops: list[str] | None = None  # what a tool asked with stop_turn (engine.repeats)
    listening = None  # (its token, from the first step with tool calls)
    rejected = 0  # answers that did not match the output type (config.output)
    out: RunOutput | None = None
    chat: ModelCallSpan | None = None  # the model call's span while in flight (tracing on)
    try:
        for iteration in range(1, config.max_iterations + 1):
            # the model is awaited here, not in a helper coroutine: one object less per run
            await _before_call(config, messages, last_input)
            _steer(config, messages)  # what arrived since the last step (the turn's start included)
            sink = ctx.events
            started = _model_started(config)
            on_text = _text_forwarder(sink, ctx.agent_id) if config.stream and sink else None
            sent = messages  # (the program's guards may rewrite what is sent, or refuse it)
            if ctx.gate is not None and ctx.gate.guarded:
                sent, refused = await ctx.gate.screen_model_call(messages, config.model.name, ctx)
                if refused:
                    out = _refused(messages, f"the model call was refused: {refused}", iteration,
                                   _own(tools_used), usage, last_input)  # fmt: skip
                    return out
            if _tracer.current is not None:  # tracing on (engine.observer.RunTracer)
                tracer: RunTracer = _tracer.current
                chat = tracer.begin_model_call(config.model.name, sent)
            try:
                response = await config.model.complete(sent, _specs(config), on_text=on_text)
            except ContextTooLongError:  # (what a guard rewrote is not shortened: no retry)
                if sent is not messages or not await _shortened(config, messages):
                    raise
                response = await config.model.complete(messages, _specs(config), on_text=on_text)
            _model_called(config, response, started)
            if chat is not None:
                chat.end(response.usage, response.message)
                chat = None
            usage += response.usage
            observer = config.observer
            if observer is not None:  # (it counts the usage as it comes)
                observer.used(response.usage)
            last_input = response.usage.input_tokens
            messages.append(response.message)
            if observer is not None and observer.records:  # a step boundary: recorded
                await observer.step()
            step = next_step(response.message, interactive=config.interactive)
            more = iteration < config.max_iterations  # room for a call that sees steering
            if more and _steer(config, messages):  # arrived during the call: answered first
                continue
            settled = settle(config.output, response.message) if config.output else None
            if isinstance(settled, Rejected):  # not the output type: shown why, tries again
                rejected = _rejected(config, messages, settled, rejected + 1)
                continue
            if isinstance(step, Final) or settled is not None:
                reason = "waiting_for_input" if config.interactive else "final"
                if settled is not None:  # the typed answer: its JSON is the content
                    messages.extend(settled.closing)
                    content, value = settled.text, settled.value
                else:
                    text = step.content if isinstance(step, Final) else ""
                    content = value = text if text.strip() else no_answer(tools_used)
                if ctx.gate is not None and ctx.gate.guarded:  # the program's guards see it
                    content, value, refused = await _screened(
                        config, messages, content, value, settled
                    )
                    if refused:
                        out = _refused(messages, refused, iteration, _own(tools_used), usage,
                                       last_input)  # fmt: skip
                        return out
                out = RunOutput(
                    content, messages, reason, _own(tools_used), usage, iteration, last_input,
                    value,
                )  # fmt: skip
                return out
            assert isinstance(step, RunTools)
            if repeats is None:
                tools_used, repeats = [], Repeats(config.repeat_limit)
                stops = []
                listening = listen_for_stop(stops)
            elif repeats.refused(step.calls):  # warned, and the same step again: stop
                note = await _stop_repeating(config, messages, step.calls, repeats)
                out = RunOutput(
                    note, messages, "repeated_call", tools_used, usage, iteration, last_input
                )
                return out
            tools_used.extend(c.name for c in step.calls)
            calls, gate = step.calls, ctx.gate
            if len(calls) == 1 and _tracer.current is None:  # (awaited here: a frame less)
                one = calls[0]
                result = await (
                    config.tools.execute(one, ctx)
                    if gate is None
                    else gate.execute(config.tools, one, ctx)
                )
                messages.extend(repeats.observe(calls, [result]))
            else:
                messages.extend(repeats.observe(calls, await _run_tools(config, calls)))
            observer = config.observer
            if observer is not None and observer.records:  # a step boundary: recorded
                await observer.step()
            if stops:  # a tool's own loop detector ended the run (repeats.stop_turn)
                messages.append(AssistantMessage(stops[0]))
                out = RunOutput(
                    stops[0], messages, "repeated_call", tools_used, usage, iteration, last_input
                )
                return out
        limit = config.max_iterations
        stopped = (
            f"Stopped: the agent made {limit} model calls without a final answer "
            f"(max_iterations={limit})."
        )
        messages.append(AssistantMessage(stopped))  # the turn ends valid: its last step closed
        out = RunOutput(
            stopped,
            messages,
            "max_iterations",
            _own(tools_used),
            usage,
            limit,
            last_input,
        )
        return out
    except asyncio.CancelledError:
        close_pending_calls(messages)
        emit(
            ctx.events,
            RUN_FINISHED,
            ctx.agent_id,
            stop_reason="cancelled",
            usage=_usage_dict(usage),
        )
        raise
    finally:
        if listening is not None:
            listening.var.reset(listening)
        if chat is not None:  # the model call failed or was cancelled
            chat.end(None)
        if out is not None and ctx.events is not None:  # (no listener: no usage dict)
            emit(
                ctx.events,
                RUN_FINISHED,
                ctx.agent_id,
                stop_reason=out.stop_reason,
                usage=_usage_dict(usage),
                **_typed(config, out),
            )


run = run_turn
"""Deprecated name of :func:`run_turn` (one release)."""

_NO_USAGE = Usage()
_NO_TOOLS: list[str] = []  # shared, never changed: a run's tools_used until it uses one


async def _stop_repeating(
    config: RunConfig, messages: list[Message], calls: tuple[ToolCall, ...], repeats: Repeats
) -> str:
    """End the run on a step repeated after a warning: its calls get a "not run" result (the
    history stays valid) and the run a "Stopped: …" note, which this returns."""
    messages.extend(refusal(c) for c in calls)
    await _stepped(config)  # a step boundary: the results are recorded
    note = repeats.stop_note(calls)
    messages.append(AssistantMessage(note))
    return note


async def _before_call(config: RunConfig, messages: list[Message], last_input: int) -> None:
    """Before each model call: let the context keeper shorten the history, refresh tools."""
    keeper = config.context_keeper
    if keeper is not None:
        await keeper.before_call(messages, config.model, config.context, last_input)
    await config.tools.refresh(config.context)  # tools listed at run time (MCP servers) start


async def _screened(
    config: RunConfig, messages: list[Message], content: str, value: object, typed: object
) -> tuple[str, object, str]:
    """An answer as the gate's guards leave it: ``(content, output, why it is withheld)``;
    the history's last reply holds what is given back (a typed answer: its call stays)."""
    ctx = config.context
    assert ctx.gate is not None
    said, refused = await ctx.gate.screen_answer(content, value, ctx)
    if refused:
        return content, value, f"the answer was withheld: {refused}"
    if said is content:
        return content, value, ""
    if typed is not None and config.output is not None:
        try:
            return said, config.output.parse(said), ""
        except ValueError as exc:
            return content, value, f"a guard's rewrite of the answer is not its type: {exc}"
    last = messages[-1]
    if isinstance(last, AssistantMessage):
        messages[-1] = replace(last, content=said)
    return said, said, ""


def _refused(
    messages: list[Message],
    note: str,
    iteration: int,
    tools_used: list[str],
    usage: Usage,
    last: int,
) -> RunOutput:
    """End a run that a guard stopped (``stop_reason="refused"``): ``note`` closes the turn."""
    text = f"Stopped: {note}"
    last_message = messages[-1] if messages else None
    if isinstance(last_message, AssistantMessage) and not last_message.tool_calls:
        messages[-1] = replace(last_message, content=text)  # (a withheld answer is not kept)
    else:
        messages.append(AssistantMessage(text))
    return RunOutput(text, messages, "refused", tools_used, usage, iteration, last)


def _rejected(config: RunConfig, messages: list[Message], rejected: Rejected, times: int) -> int:
    """An answer that is not the output type: the model is shown why (the history stays
    valid); past the retries allowed, :class:`~retinue.errors.OutputValidationError`."""
    messages.extend(rejected.feedback)
    spec = config.output
    if spec is not None and times > spec.retries:
        raise give_up(spec, rejected)
    return times


def _specs(config: RunConfig) -> list[ToolSpec]:
    """The tools the model is offered: the registry's, and ``final_result`` when the run has
    an output type (:mod:`retinue.engine.output`)."""
    specs = config.tools.specs()
    return specs if config.output is None else [*specs, config.output.tool]


def _model_started(config: RunConfig) -> float:
    ctx = config.context
    if ctx.events is not None:  # (no event, no work: this runs on every step)
        emit(ctx.events, MODEL_STARTED, ctx.agent_id, model=config.model.name)
    return time.perf_counter()


def _own(tools_used: list[str]) -> list[str]:
    return [] if tools_used is _NO_TOOLS else tools_used


async def _shortened(config: RunConfig, messages: list[Message]) -> bool:
    """The model said the history is too long: whether the context keeper shortened it."""
    keeper = config.context_keeper
    return keeper is not None and await keeper.on_context_too_long(
        messages, config.model, config.context
    )


def _model_called(config: RunConfig, response: ModelResponse, started: float) -> None:
    ctx = config.context
    if ctx.events is not None:
        fallback = {}  # a fallback model answered (retinue.llm.fallback): the event says which
        if response.fallback_from:
            fallback = {"model": response.model, "fallback_from": response.fallback_from}
        emit(
            ctx.events,
            MODEL_CALLED,
            ctx.agent_id,
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
            seconds=round(time.perf_counter() - started, 4),
            cost_usd=cost_usd(response.model or config.model.name, response.usage),  # None: unknown
            **fallback,
        )


async def _run_tools(
    config: RunConfig, calls: tuple[ToolCall, ...], *, traced: bool = False
) -> list[ToolResultMessage]:
    """Run the calls (in parallel), each through the context's gate when it has one (and,
    tracing on, each in a span of the tracer's around the gate)."""
    if _tracer.current is not None and not traced:
        tracer: RunTracer = _tracer.current
        return await tracer.tool_calls(calls, lambda c: _run_tools(config, (c,), traced=True))
    registry, ctx = config.tools, config.context
    gate = ctx.gate
    if gate is None:
        if len(calls) == 1:
            return [await registry.execute(calls[0], ctx)]
        return list(await asyncio.gather(*(registry.execute(c, ctx) for c in calls)))
    if len(calls) == 1:
        return [await gate.execute(registry, calls[0], ctx)]
    return list(await asyncio.gather(*(gate.execute(registry, c, ctx) for c in calls)))


STEERING_NOTE = "[Your parent sent this while you were working; take it into account:]\n{text}"


def _steer(config: RunConfig, messages: list[Message]) -> bool:
    """At a step boundary: show the model the steering messages that arrived meanwhile.

    Before every model call (the first one included: steering sent as the turn began joins
    the turn's own message, never two user messages in a row), and after a reply that came
    with steering pending. Only where a user message may follow (not between a tool call and
    its result); True if one was added.
    """
    observer = config.observer
    last = messages[-1] if messages else None
    if observer is None or (isinstance(last, AssistantMessage) and last.tool_calls):
        return False
    texts = observer.steering()
    if not texts:
        return False
    note = STEERING_NOTE.format(text="\n\n".join(texts))
    if isinstance(last, UserMessage):
        messages[-1] = UserMessage(f"{last.content}\n\n{note}")
    else:
        messages.append(UserMessage(note))
    return True


async def _stepped(config: RunConfig) -> None:
    """A step boundary: the observer records it, if it records steps."""
    observer = config.observer
    if observer is not None and observer.records:
        await observer.step()


def _text_forwarder(sink: EventSink, agent_id: str) -> TextCallback:
    def forward(text: str) -> None:
        emit(sink, TEXT_DELTA, agent_id, text=text)

    return forward


async def run_pending_calls(config: RunConfig, state: RunState | None = None) -> None:
    """Run the calls of the history's last step that have no result yet, as
    :func:`run_turn` runs a step's calls (through the gate), and add their results: a turn
    that goes on from a stored history whose last step was cut short (a call waiting for
    approval). Without a state: the config's own history, as :func:`run_turn`."""
    messages = config.messages if state is None else state.messages
    calls = tuple(open_calls(messages))
    if calls:
        messages.extend(await _run_tools(config, calls))
        await _stepped(config)


def close_pending_calls(messages: list[Message]) -> None:
    """After a cancellation, answer every tool call that has no result yet."""
    close_open_calls(messages, CANCELLED_RESULT)


CANCELLED_RESULT = "Error: cancelled before it finished"


def _typed(config: RunConfig, out: RunOutput) -> dict[str, object]:
    """What ``run_finished`` says of a typed answer: the role and the output as JSON data."""
    if config.output is None or out.stop_reason not in ("final", "waiting_for_input"):
        return {}
    return {"role": config.context.role, "output": config.output.jsonable(out.output)}


def _usage_dict(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "requests": usage.requests,
    }
