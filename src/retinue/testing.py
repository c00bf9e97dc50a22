"""Test helpers that ship with the package: the scripted fake model."""

from retinue.llm.testing import ModelCall, ScriptedModel, Step, call_tool, call_tools

__all__ = ["ModelCall", "ScriptedModel", "Step", "call_tool", "call_tools"]
