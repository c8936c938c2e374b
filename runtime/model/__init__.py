"""The plain data every other layer speaks, and the pure rules over it: entries, events,
runs and requests, configuration, routing, budgets and guards, decisions, text, memories
and who sees them, the write rule table, attachments, tool specs and token estimates. It
imports nothing of the runtime but ``runtime.errors``."""

__all__: list[str] = []
