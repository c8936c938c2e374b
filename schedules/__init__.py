"""Cron triggers that submit runs (APScheduler 3.x). Not built yet."""

__all__: list[str] = []
