"""The Discord front end's bot: thin, with setup_hook loading one cog per feature (RoboDanny style)."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from collections.abc import Sequence
from typing import Any

import aiohttp
import discord
from discord import app_commands
from discord.ext import commands

from bot import logs, metrics
from bot.command_sync import sync_if_changed
from bot.companions import introduce
from bot.config import Config, shard_ids
from bot.engine import Engine
from bot.health import beat, heartbeat_path
from bot.metrics_server import MetricsServer
from memory.store import StoreError

log = logging.getLogger(__name__)

EXTENSIONS = ("cogs.messages", "cogs.threads", "cogs.admin", "cogs.visibility", "cogs.playbooks",
              "cogs.tasks", "cogs.autonomy", "cogs.help", "cogs.access", "cogs.dashboard")
# Never ping @everyone, @here or roles; users only when the reply names them.
# Nobody is pinged unless a reply names who may be: the model could write any user id.
SAFE_MENTIONS = discord.AllowedMentions(everyone=False, roles=False, users=False, replied_user=False)
MAX_PINGABLE = 100  # Discord's limit on an allowed-mentions user list


def mentions_for(user_ids: set[int]) -> discord.AllowedMentions:
    """Pings allowed only for these users (the people in the conversation being answered)."""
    users = [discord.Object(uid) for uid in sorted(user_ids)[:MAX_PINGABLE]]
    return discord.AllowedMentions(everyone=False, roles=False, users=users, replied_user=False)


class StelisTree(app_commands.CommandTree):
    async def _call(self, interaction: discord.Interaction) -> None:
        # discord.py's one door to every command (private, stable across 2.x): what a command makes the model do
        # is the server's, in /usage, the dashboard and the logs
        with logs.tagged(guild=interaction.guild_id, channel=interaction.channel_id):
            await super()._call(interaction)

    async def on_error(self, interaction: discord.Interaction, error: app_commands.AppCommandError) -> None:
        if isinstance(error, app_commands.CheckFailure):
            return  # a check that refuses (Manage Server) has answered the person itself
        await super().on_error(interaction, error)


def intents() -> discord.Intents:
    """Only what is used: guild messages with their content, guilds and threads; no members intent."""
    chosen = discord.Intents.default()
    chosen.message_content = True
    chosen.members = False
    chosen.presences = False
    return chosen


class StelisBot(commands.Bot):
    """The persona's bot (RoboDanny's shape): one cog per feature loaded in setup_hook, the engine a typed
    attribute every cog reaches through `cogs.interactions.engine_of`."""

    def __init__(self, config: Config, engine: Engine | None = None, *, members_intent: bool = False,
                 **shard_options: Any):
        chosen = intents()
        chosen.members = members_intent  # the tests' fake gateway needs the member cache
        super().__init__(command_prefix=config.discord.command_prefix, intents=chosen, tree_cls=StelisTree,
                         allowed_mentions=SAFE_MENTIONS, help_command=None, **shard_options)
        self.engine: Engine | None = engine  # opened in setup_hook when not given
        self.config = config
        self._heartbeat: asyncio.Task[None] | None = None
        self._metrics: MetricsServer | None = None
        self.add_command(sync)

    def gateway_metrics(self) -> None:
        """Each shard's latency and connection, as the gateway reports them now, and the database pool's
        use (read at each scrape)."""
        if self.engine is not None:
            metrics.read_pool(self.engine.database_usage())
        for shard_id, latency, connected in self.connections():
            up = connected and self.is_ready()
            metrics.GATEWAY_CONNECTED.labels(str(shard_id)).set(1 if up else 0)
            if latency == latency and latency != float("inf"):  # nan and inf before the first heartbeat
                metrics.GATEWAY_LATENCY.labels(str(shard_id)).set(latency)

    def connections(self) -> list[tuple[int, float, bool]]:
        """(shard, latency, connected) of each shard this process runs: one, shard 0 unless told otherwise."""
        return [(self.shard_id or 0, self.latency, not self.is_closed())]

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        """Processes sharing a database take turns to log in; alone, discord.py's own pause."""
        if self.engine is None or not await self.engine.pace_identify(shard_id or 0):
            await super().before_identify_hook(shard_id, initial=initial)

    async def setup_hook(self) -> None:
        started_here = self.engine is None
        engine = self.engine = self.engine or await Engine.open(self.config)
        for extension in EXTENSIONS:
            if extension not in self.extensions:
                await self.load_extension(extension)
        await engine.start_memory()
        self._heartbeat = asyncio.create_task(beat(heartbeat_path(self.config.data_dir), self.is_ready))
        if self.config.metrics.port is not None and self._metrics is None:
            self._metrics = MetricsServer(self.config.metrics.host, self.config.metrics.port, self.gateway_metrics)
            await self._metrics.start()
        if started_here:  # the real bot (tests pass their own engine): start-up objects live as long as it
            await sync_if_changed(self.tree, self.config.data_dir)
            gc.freeze()  # ... so full collections need not walk them again (they were the p95)

    async def close(self) -> None:
        log.info("shutting down: stopping the scheduler, writing snapshots, closing the database")
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        if self._metrics is not None:
            await self._metrics.stop()
        await super().close()
        if self.engine is not None:
            await self.engine.close()


class ShardedStelisBot(StelisBot, commands.AutoShardedBot):
    """The same bot on several shards (its share of them when processes split the shards)."""

    def connections(self) -> list[tuple[int, float, bool]]:
        return [(shard_id, latency, not self.shards[shard_id].is_closed()) for shard_id, latency in self.latencies]


@commands.command(name="sync", hidden=True)
@commands.is_owner()
async def sync(ctx: commands.Context[commands.Bot], where: str = "guild") -> None:
    """Owner only: !sync guild | global | clear-guild (the commands sync globally by themselves only on the first
    start and after they changed: bot/command_sync.py)."""
    await ctx.send(await sync_commands(ctx.bot, where, ctx.guild))


def make_bot(config: Config, engine: Engine | None = None, *, members_intent: bool = False) -> StelisBot:
    """A StelisBot, sharded when config says so; setup_hook opens the engine (store) unless given one."""
    # A text persona never joins voice: no warning at every start that voice libraries are missing.
    discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
    if not (config.discord.sharded or config.discord.shards):
        return StelisBot(config, engine, members_intent=members_intent)
    shard_options: dict[str, Any] = {}
    if config.discord.shards:  # this process's share of the shards (others run elsewhere)
        shard_options = {"shard_ids": shard_ids(config.discord.shards), "shard_count": config.discord.shard_count}
    return ShardedStelisBot(config, engine, members_intent=members_intent, **shard_options)


SYNC_USAGE = ("Usage: !sync guild (this server, at once) | global (every server, within the hour) | clear-guild "
              "(drop this server's copies)")


async def sync_commands(bot: commands.Bot, where: str, guild: discord.Guild | None) -> str:
    """Sync the slash commands; warns when a server would list each command twice (guild and global copies)."""
    tree = bot.tree
    if where == "global":
        synced = await tree.sync()
        copies = guild is not None and bool(await tree.fetch_commands(guild=guild))
        return f"Synced {len(synced)} command(s) globally." + (
            " This server also has its own copies (from !sync guild), so members see each command twice: "
            "!sync clear-guild here removes them." if copies else "")
    if guild is None:
        return SYNC_USAGE + " (guild and clear-guild only in a server)"
    if where in ("clear-guild", "clear"):
        tree.clear_commands(guild=guild)
        await tree.sync(guild=guild)
        return "This server's own copies of the commands are gone; the global ones remain (if synced)."
    if where == "guild":
        tree.copy_global_to(guild=guild)
        synced = await tree.sync(guild=guild)
        globals_too = bool(await tree.fetch_commands())
        return f"Synced {len(synced)} command(s) to this server." + (
            " The commands are also synced globally, so members see each twice: keep one (!sync clear-guild "
            "drops this server's copies)." if globals_too else "")
    return SYNC_USAGE


def _stop(bots: Sequence[commands.Bot], sig: signal.Signals) -> None:
    log.info("received %s", sig.name)
    for bot in bots:
        asyncio.create_task(bot.close())  # noqa: RUF006 - the bot's close runs to the end of the loop


async def run_discord(config: Config, companions: Sequence[Config] = ()) -> int:
    """Run this persona's bot and its companions' until Discord closes the connection or SIGTERM/SIGINT asks
    for a graceful stop; a bot that cannot start stops the others (the worst exit code is returned)."""
    bots = [make_bot(c) for c in (config, *companions)]
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _stop, bots, sig)

    async def met() -> None:  # a bot's user id is known once it is in: each answers the others as personas
        introduce([(b.config, b.user.id if b.user else None) for b in bots])

    for bot in bots:
        bot.add_listener(met, "on_ready")
    serving = [asyncio.create_task(_serve(bot, len(bots) > 1)) for bot in bots]
    await asyncio.wait(serving, return_when=asyncio.FIRST_COMPLETED)
    for bot in bots:  # one ended (a bad token, a signal): the process stops as one
        if not bot.is_closed():
            await bot.close()
    return max([await task for task in serving])


async def _serve(bot: StelisBot, named: bool) -> int:
    """One bot until it closes; an error it cannot start with is logged and becomes the exit code."""
    who = f"{bot.config.persona.name}: " if named else ""
    token = bot.config.discord.token.get_secret_value() if bot.config.discord.token else ""
    try:
        async with bot:
            await bot.start(token)
    except discord.LoginFailure:
        log.error("%sDiscord refused the token (DISCORD_TOKEN): check it in the developer portal", who)
        return 2
    except StoreError as exc:  # the database cannot be used, or another process holds it
        log.error("%s%s", who, exc)
        return 2
    except discord.PrivilegedIntentsRequired:
        log.error("%sDiscord refused the connection: turn on 'Message Content Intent' (and 'Server Members "
                  "Intent') under Bot > Privileged Gateway Intents in the developer portal, then start again", who)
        return 2
    except (aiohttp.ClientError, OSError) as exc:
        log.error("%scannot reach Discord (%s); check the network, then start again", who, exc)
        return 3
    finally:
        if not bot.is_closed():
            await bot.close()
    return 0
