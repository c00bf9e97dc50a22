"""Deprecated alias of :mod:`retinue.store.pg_schema` (moved there, issue 42).

Import from the new module: this alias goes in the next release.
"""

from retinue.store.pg_schema import MIGRATIONS, SCHEMA_VERSION, enable_pgvector, migrate

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "enable_pgvector", "migrate"]
