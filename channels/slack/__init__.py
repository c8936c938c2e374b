"""The Slack channel (`[channels.slack]`).

Importing this package is cheap: slack-bolt and slack-sdk load with
``channels.slack.channel`` (``SlackChannel``), which `maiden run` imports only
when Slack is enabled.
"""

from .config import DEFAULT_API_URL, SlackConfig, SlackSecrets
from .mapping import Ignored, Inbound, read_event

__all__ = ["DEFAULT_API_URL", "Ignored", "Inbound", "SlackConfig", "SlackSecrets",
           "read_event"]
