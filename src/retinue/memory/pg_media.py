"""Deprecated alias of :mod:`retinue.store.pg_media` (moved there, issue 42).

Import from the new module: this alias goes in the next release.
"""

from retinue.store.pg_media import PgMedia

__all__ = ["PgMedia"]
