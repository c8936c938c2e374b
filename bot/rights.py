"""Who may do what on each chat channel, as `maiden check`, the banner and the console say it."""

from __future__ import annotations

from .config import MaidenConfig

__all__ = ["rights_blocks", "rights_lines"]


def rights_blocks(cfg: MaidenConfig) -> list[tuple[str, list[str]]]:
    """Each enabled chat channel's name and its effective rules, one line a rule."""
    blocks: list[tuple[str, list[str]]] = []
    for name, channel in (("slack", cfg.channels.slack), ("discord", cfg.channels.discord)):
        if channel is None or not channel.enabled:
            continue
        access = channel.access
        lines = access.describe()
        # The runtime checks the approvers list again after the channel's rules.
        who = channel.approvers or cfg.agent.approvers
        if who and any("approve" in rule.rights for rule in access.rules):
            source = "approvers" if channel.approvers else "[agent] approvers"
            lines.append(f"and approve only for {', '.join(who)} ({source})")
        blocks.append((name, lines))
    return blocks


def rights_lines(cfg: MaidenConfig, width: int) -> list[str]:
    """The block of ``rights_blocks`` under a ``rights`` label ``width`` wide (none when no
    chat channel is enabled)."""
    lines: list[str] = []
    for name, rules in rights_blocks(cfg):
        label = "rights" if not lines else ""
        lines.append(f"  {label:<{width}} {name}:")
        lines += [f"  {'':<{width}}   {rule}" for rule in rules]
    return lines
