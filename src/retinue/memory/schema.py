"""Deprecated alias of :mod:`retinue.store.sqlite_schema` (moved there, issue 42).

Import from the new module: this alias goes in the next release.
"""

from retinue.store.sqlite_schema import MIGRATIONS, SCHEMA_VERSION, migrate

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate"]
