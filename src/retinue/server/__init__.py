"""The HTTP service (``retinue serve``): see :mod:`retinue.server.app` for the endpoints."""

from retinue.server.app import create_app

__all__ = ["create_app"]
