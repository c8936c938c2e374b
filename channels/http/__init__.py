"""The HTTP API channel (DESIGN §9).

Importing this package is cheap: FastAPI and uvicorn load when the channel starts
(``HttpChannel``), or when ``channels.http.app`` / ``channels.http.server`` are
imported directly (tests, tools that build the app themselves).
"""

from .channel import HttpChannel
from .config import HttpConfig, OpenAIApiConfig, is_loopback

__all__ = ["HttpChannel", "HttpConfig", "OpenAIApiConfig", "is_loopback"]
