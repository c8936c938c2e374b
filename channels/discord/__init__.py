"""The Discord channel (`[channels.discord]`).

Importing this package is cheap: discord.py loads with ``channels.discord.channel``
(``DiscordChannel``), which `maiden run` imports only when Discord is enabled.
"""

from .config import DEFAULT_API_URL, DiscordConfig
from .mapping import Ignored, Inbound, Seen, read_message

__all__ = ["DEFAULT_API_URL", "DiscordConfig", "Ignored", "Inbound", "Seen", "read_message"]
