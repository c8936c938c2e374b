"""Connection strings fit to print (runtime/stores/dsn.py): no password survives."""

from __future__ import annotations

import pytest

from runtime.stores.dsn import redact_dsn


@pytest.mark.parametrize(
    ("dsn", "printed"),
    [
        ("postgresql://maiden:hunter2@db.internal:5432/maiden",
         "postgresql://maiden:***@db.internal:5432/maiden"),
        ("postgresql://db.internal/maiden", "postgresql://db.internal/maiden"),
        ("postgresql://maiden@db.internal/maiden", "postgresql://maiden@db.internal/maiden"),
        ("postgresql://:secret@db.internal/maiden", "postgresql://:***@db.internal/maiden"),
        ("postgresql://db/maiden?password=hunter2&sslmode=require",
         "postgresql://db/maiden?password=***&sslmode=require"),
        ("host=db user=maiden password=hunter2 dbname=maiden",
         "host=db user=maiden password=*** dbname=maiden"),
        ("host=db PASSWORD=hunter2", "host=db PASSWORD=***"),
        ("", ""),
    ],
)
def test_redact_dsn(dsn: str, printed: str) -> None:
    assert redact_dsn(dsn) == printed
    assert "hunter2" not in redact_dsn(dsn) and "secret" not in redact_dsn(dsn)
