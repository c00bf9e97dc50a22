"""Test helpers that ship with the package: the scripted fake model.

``ScriptedModel([...])`` replays scripted answers (``call_tool`` / ``call_tools`` script tool
calls), records every request in ``.calls`` (:class:`ModelCall`: ``.messages``, ``.tools``,
``.tool_names``) and fails on a call nobody scripted; see :mod:`retinue.llm.testing`.
"""

from retinue.llm.testing import ModelCall, ScriptedModel, Step, call_tool, call_tools

__all__ = ["ModelCall", "ScriptedModel", "Step", "call_tool", "call_tools"]
