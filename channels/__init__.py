"""Adapters between people and the runtime, one package per channel (``channels.http``,
``channels.slack``, ``channels.discord``) plus the terminal; what the chat channels share
(``access``, ``talk``, ``prompts``, ``work``, ``retry``) lives here once. Each uses only the
runtime's public API."""

from .base import Channel, Link
from .retry import Backoff, ChannelRefused, Unreachable, keep_trying
from .terminal import chat, on_sigint, render_entry, render_run, render_transition

__all__ = ["Backoff", "Channel", "ChannelRefused", "Link", "Unreachable", "chat",
           "keep_trying", "on_sigint", "render_entry", "render_run", "render_transition"]
