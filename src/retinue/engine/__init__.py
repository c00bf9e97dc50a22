"""The run loop and its configuration."""

from retinue.engine.config import ContextKeeper, RunConfig, RunOutput, RunState, StopReason
from retinue.engine.loop import Final, RunTools, next_step, run, run_turn
from retinue.engine.observer import RunObserver
from retinue.engine.pause import Paused

__all__ = [
    "ContextKeeper",
    "Final",
    "Paused",
    "RunConfig",
    "RunObserver",
    "RunOutput",
    "RunState",
    "RunTools",
    "StopReason",
    "next_step",
    "run",
    "run_turn",
]
