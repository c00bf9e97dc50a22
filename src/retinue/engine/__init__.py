"""The run loop and its configuration."""

from retinue.engine.config import ContextKeeper, RunConfig, RunOutput, StopReason
from retinue.engine.loop import Final, RunTools, next_step, run, run_turn

__all__ = [
    "ContextKeeper",
    "Final",
    "RunConfig",
    "RunOutput",
    "RunTools",
    "StopReason",
    "next_step",
    "run",
    "run_turn",
]
