"""Deprecated: :mod:`retinue.engine.small_model_prompt` is this module's name now.

Kept for one release. ``COMPACT_OMITS`` is ``SMALL_MODEL_OMITS`` and ``compact_main_prompt``
is :func:`~retinue.engine.small_model_prompt.small_model_main_prompt` (reading either warns);
the other names are the same. "Compact" is Claude Code's word for compressing a history, which
this module never did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from retinue._deprecated import module_aliases
from retinue.engine.small_model_prompt import (
    MAX_INLINE_BYTES,
    MAX_INLINE_FILES,
    MAX_LISTED,
    MAX_ROLES,
    MAX_SKILL_NAMES,
    with_named_files,
    with_role_choices,
    workspace_overview,
)

__all__ = [
    "MAX_INLINE_BYTES",
    "MAX_INLINE_FILES",
    "MAX_LISTED",
    "MAX_ROLES",
    "MAX_SKILL_NAMES",
    "with_named_files",
    "with_role_choices",
    "workspace_overview",
]

_HOME = "retinue.engine.small_model_prompt"
_RENAMED = {"COMPACT_OMITS": "SMALL_MODEL_OMITS", "compact_main_prompt": "small_model_main_prompt"}

if TYPE_CHECKING:  # the deprecated names, for type checkers (at run time they warn)
    from retinue.engine.small_model_prompt import SMALL_MODEL_OMITS, small_model_main_prompt

    COMPACT_OMITS = SMALL_MODEL_OMITS
    compact_main_prompt = small_model_main_prompt
else:
    __getattr__ = module_aliases(__name__, _RENAMED, _HOME)
