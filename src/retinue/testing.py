"""Test helpers that ship with the package: the one import path for tests of an agent.

``ScriptedModel([...])`` replays scripted answers (``call_tool`` / ``call_tools`` script tool
calls, ``final_result`` a typed answer), records every request in ``.calls``
(:class:`ModelCall`: ``.messages``, ``.tools``, ``.tool_names``) and fails on a call nobody
scripted; see :mod:`retinue.llm.testing`.

A test of a program's own agent swaps the model for a block::

    with agent.override(model=ScriptedModel(["Paris."])):
        assert agent.run_sync("Capital of France?").content == "Paris."

Real model APIs: with the environment variable ``RETINUE_BLOCK_REAL_MODELS=1``
(:data:`BLOCK_REAL_MODELS`; Retinue's own test suite sets it) a provider may only reach a
server on the loopback interface; any other request raises
:class:`~retinue.errors.ModelError` before a byte leaves the machine, so a test that forgot
its scripted model fails instead of spending money.
"""

from __future__ import annotations

from typing import Any

from retinue.llm._structured import FINAL_TOOL
from retinue.llm.guard import ENV_VAR as BLOCK_REAL_MODELS
from retinue.llm.testing import ModelCall, ScriptedModel, Step, call_tool, call_tools
from retinue.messages import AssistantMessage

__all__ = [
    "BLOCK_REAL_MODELS",
    "ModelCall",
    "ScriptedModel",
    "Step",
    "call_tool",
    "call_tools",
    "final_result",
]


def final_result(arguments: dict[str, Any] | str) -> AssistantMessage:
    """A scripted typed answer: a call of the ``final_result`` tool an agent with an output
    type is offered (``arguments`` as a dict or raw JSON)."""
    return call_tool(FINAL_TOOL, arguments)
