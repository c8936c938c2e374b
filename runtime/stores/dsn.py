"""Connection strings fit to print."""

from __future__ import annotations

import re

__all__ = ["redact_dsn"]


def redact_dsn(dsn: str) -> str:
    """The connection string without its password (``user:***@``, ``password=***``)."""
    dsn = re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", dsn)
    return re.sub(r"(?i)(password=)[^&\s]*", r"\1***", dsn)
