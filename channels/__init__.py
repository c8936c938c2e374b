"""Adapters between people and the runtime: terminal now; Slack, Discord and HTTP next."""

from .terminal import chat, render_entry, render_run, render_transition

__all__ = ["chat", "render_entry", "render_run", "render_transition"]
