"""A one-shot run of a role as the conversation workflow's own Update (to come).

The OpenAI-compatible endpoint's ``retinue/<role>`` models run one role once, in a
conversation of their own that ends with the run. This mixin is where the conversation
workflow holds that run itself, so that it is closed, and consolidated once, however the
front end that asked for it fares.
"""

from __future__ import annotations

__all__ = ["RoleRuns"]


class RoleRuns:
    """The ``retinue/<role>`` run of a conversation workflow (a mixin of it)."""
