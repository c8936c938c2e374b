"""Waiting for a log line: ``with Heard("maiden", "trying again") as heard: ... await
heard.said.wait()``."""

from __future__ import annotations

import asyncio
import logging

__all__ = ["Heard"]


class Heard(logging.Handler):
    """Sets ``said`` when a record holding ``text`` is logged (by ``logger`` while in
    ``with``)."""

    def __init__(self, logger: str, text: str) -> None:
        super().__init__()
        self.logger, self.text, self.said = logger, text, asyncio.Event()

    def __enter__(self) -> Heard:
        logging.getLogger(self.logger).addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger(self.logger).removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.said.set()
