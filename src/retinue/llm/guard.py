"""A switch that forbids requests to real model APIs (the test suite turns it on).

When ``RETINUE_BLOCK_REAL_MODELS`` is set to ``1``, a provider may only talk to a server on
the loopback interface; anything else raises :class:`~retinue.errors.ModelError` before a
byte leaves the machine.
"""

from __future__ import annotations

import ipaddress
import os
from urllib.parse import urlsplit

from retinue.errors import ModelError

__all__ = ["ENV_VAR", "check_request_allowed", "is_loopback_url"]

ENV_VAR = "RETINUE_BLOCK_REAL_MODELS"


def is_loopback_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_request_allowed(base_url: str) -> None:
    """Raise if real model requests are blocked and ``base_url`` is not on loopback."""
    if os.environ.get(ENV_VAR) == "1" and not is_loopback_url(base_url):
        raise ModelError(
            f"real model requests are blocked ({ENV_VAR}=1) but a request to {base_url} "
            "was attempted; use retinue.testing.ScriptedModel or a loopback server"
        )
