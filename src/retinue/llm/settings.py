"""Model settings: one typed value for how a model is asked, per agent, role or run.

:class:`ModelSettings` holds what a caller may set about a model request: reasoning
``effort``, ``max_output_tokens``, ``temperature`` and ``top_p``, the client's ``timeout`` and
``max_retries``, ``fallback_models``, the prompt-cache ``cache_ttl`` and provider-specific
``extra`` body fields. Every field is optional: ``None`` (or empty) leaves the provider's or
the adapter's default. Values combine with :meth:`ModelSettings.merged` (the later value
wins field by field), so a role's settings refine the agent's.

Each provider maps what it supports (``AnthropicModel``: ``effort`` to
``output_config.effort`` on models with adaptive thinking, ``max_output_tokens`` to
``max_tokens``, ``cache_ttl`` to the cache breakpoints' ``ttl``); a setting a model does not
take is dropped with a logged notice rather than sent to be refused. :func:`with_settings`
applies settings to any :class:`~retinue.llm.base.Model` whose adapter takes them (a
``with_settings`` method); others run unchanged, with a notice.

:func:`settings_for` picks a model's entry of ``config.toml``'s ``[model_settings.<model or
alias>]`` tables. In role files and ``config.toml`` the same fields are written flat
(``effort: high`` is Claude Code's own role-file field; ``max_output_tokens``,
``temperature``, ``top_p``, ``timeout``, ``max_retries``, ``fallback_models`` and
``cache_ttl`` are Retinue's), read by :meth:`ModelSettings.from_mapping`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol, runtime_checkable

from retinue.config import canonical_model
from retinue.errors import ConfigError
from retinue.llm.base import Model
from retinue.llm.fallback import FallbackModel, with_fallbacks

__all__ = [
    "CACHE_TTLS",
    "EFFORTS",
    "SETTING_KEYS",
    "ModelSettings",
    "TakesSettings",
    "settings_for",
    "with_settings",
]

log = logging.getLogger("retinue.llm")

EFFORTS = ("low", "medium", "high", "xhigh", "max")
"""Reasoning effort levels (Anthropic's ``output_config.effort``; OpenAI's
``reasoning.effort`` takes the first three and ``minimal``/``none``)."""
CACHE_TTLS = ("5m", "1h")
"""Prompt-cache lifetimes Anthropic offers (``cache_control.ttl``)."""


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """How a model is asked (see the module); every field optional."""

    effort: str | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    timeout: float | None = None
    max_retries: int | None = None
    fallback_models: tuple[str, ...] = ()
    cache_ttl: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.effort is not None and self.effort not in EFFORTS:
            raise ConfigError(f"effort must be one of {', '.join(EFFORTS)}, not {self.effort!r}")
        if self.cache_ttl is not None and self.cache_ttl not in CACHE_TTLS:
            raise ConfigError(
                f"cache_ttl must be one of {', '.join(CACHE_TTLS)}, not {self.cache_ttl!r}"
            )
        _check(self.max_output_tokens, "max_output_tokens", low=1)
        _check(self.max_retries, "max_retries", low=0)
        _check(self.temperature, "temperature", low=0, high=2)
        _check(self.top_p, "top_p", low=0, high=1)
        if self.timeout is not None and not self.timeout > 0:
            raise ConfigError(f"timeout must be a positive number of seconds, not {self.timeout}")

    @property
    def empty(self) -> bool:
        """True when nothing is set."""
        return self == ModelSettings()

    def merged(self, later: ModelSettings | None) -> ModelSettings:
        """These settings with every field ``later`` sets taking over (``extra`` merged)."""
        if later is None:
            return self
        changes: dict[str, Any] = {}
        for f in fields(later):
            value = getattr(later, f.name)
            if value is not None and value != () and value != {}:
                changes[f.name] = value
        if "extra" in changes:
            changes["extra"] = {**self.extra, **changes["extra"]}
        return replace(self, **changes)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], where: str) -> ModelSettings:
        """Settings from flat keys (``effort``, ``max_output_tokens``, ... with ``-`` or
        ``_``); an unknown key or a wrong value is a :class:`ConfigError` naming ``where``."""
        values: dict[str, Any] = {}
        for raw_key, value in data.items():
            key = str(raw_key).replace("-", "_")
            if key not in SETTING_KEYS:
                known = ", ".join(SETTING_KEYS)
                raise ConfigError(f"{where}: unknown model setting {raw_key!r} (known: {known})")
            values[key] = _coerce(key, value, where)
        try:
            return cls(**values)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None


SETTING_KEYS = tuple(f.name for f in fields(ModelSettings))


def _check(value: float | None, name: str, *, low: float, high: float | None = None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ConfigError(f"{name} must be {bound}, not {value!r}")


_INTS = ("max_output_tokens", "max_retries")
_FLOATS = ("temperature", "top_p", "timeout")


def _coerce(key: str, value: Any, where: str) -> Any:
    """A role-file or config value (often a string) as the field's type."""
    try:
        if key in _INTS:
            return int(value)
        if key in _FLOATS:
            return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {key} must be a number, not {value!r}") from None
    if key == "fallback_models":
        items = value.split(",") if isinstance(value, str) else list(value or ())
        return tuple(str(v).strip() for v in items if str(v).strip())
    if key == "extra":
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: extra must be a table of request fields")
        return dict(value)
    return None if value is None else str(value).strip().lower()


@runtime_checkable
class TakesSettings(Protocol):
    """A model adapter that can be asked with :class:`ModelSettings`."""

    def with_settings(self, settings: ModelSettings) -> Model: ...


def with_settings(
    model: Model,
    settings: ModelSettings | None,
    model_for: Callable[[str], Model] | None = None,
) -> Model:
    """``model`` asked with ``settings`` (merged over its own); unchanged when there are
    none, or when its adapter takes none (then with a logged notice). With ``model_for``,
    ``fallback_models`` are built by it and take over the model's overloads
    (:class:`~retinue.llm.fallback.FallbackModel`)."""
    if settings is None or settings.empty:
        return model
    if isinstance(model, FallbackModel):
        fallbacks = [with_settings(f, settings) for f in model.fallbacks]
        return FallbackModel(with_settings(model.primary, settings, model_for), fallbacks)
    if isinstance(model, TakesSettings):
        out = model.with_settings(settings)
    else:
        log.warning("model settings are not applied to %s: its adapter takes none", model.name)
        out = model
    if model_for is None:
        return out
    return with_fallbacks(out, settings.fallback_models, model_for)


def settings_for(
    model_name: str,
    table: Mapping[str, Mapping[str, Any]],
    aliases: Mapping[str, str] | None = None,
    where: str = "config.toml",
) -> ModelSettings | None:
    """The settings ``table`` (``config.toml``'s ``[model_settings]``, keyed by model or
    alias) gives ``model_name`` (``provider:model``); None when it names none. Every entry is
    checked, so a mistake is reported even for a model not in use."""
    found = None
    for key, values in table.items():
        label = f"[model_settings.{key}] in {where}"
        settings = ModelSettings.from_mapping(values, label)
        if canonical_model(key, aliases, where=label) == model_name:
            found = settings
    return found
