"""Long-term memory of agents: core blocks, archival passages, consolidation."""

from retinue.memory.base import Memory

__all__ = ["Memory"]
