"""Slash commands synced once by themselves: on the first start, and after an upgrade changed them.

Syncing at every start spends Discord's tight rate limit for nothing (RoboDanny never does); never syncing
leaves a new bot with no commands until its owner finds `!sync`. A fingerprint of the commands, kept in the
data folder, tells the two apart.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import discord
from discord import app_commands

log = logging.getLogger(__name__)

SYNCED_FILE = "commands.synced"  # in data_dir: the fingerprint of the commands last synced from here


def fingerprint(tree: app_commands.CommandTree[Any]) -> str:
    """The global commands as Discord would receive them, hashed: any change to a name, option or text shows."""
    payload = sorted((command.to_dict(tree) for command in tree.get_commands()), key=lambda c: str(c["name"]))
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


async def sync_if_changed(tree: app_commands.CommandTree[Any], data_dir: Path) -> int | None:
    """Sync the commands globally unless these very commands were synced from here before; how many were synced
    (None: nothing to do, or Discord refused, which is logged with what the owner can do)."""
    path = data_dir / SYNCED_FILE
    now = fingerprint(tree)
    if path.exists() and path.read_text().strip() == now:
        return None
    try:
        synced = await tree.sync()
    except discord.HTTPException as exc:
        log.warning("the slash commands could not be synced (%s): as the bot's owner, type !sync guild in a server "
                    "(or !sync global); was the bot invited with the applications.commands scope?", exc)
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(now)
    log.info("synced %d slash command(s) globally (first start, or the commands changed): every server lists them "
             "within the hour; !sync guild in a server shows them there at once", len(synced))
    return len(synced)
