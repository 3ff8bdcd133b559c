"""/autonomy: the persona's own time in this server (seed 001). Changes need Manage Server."""

from __future__ import annotations

import discord
from discord import app_commands
from discord.ext import commands

from bot.report import autonomy_lines, autonomy_log_lines, pulse_text, set_text
from cogs.interactions import MANAGE, ManagerGroup, answer, engine_of
from memory.errors import Failure
from memory.records import Scope


def server(interaction: discord.Interaction) -> Scope:
    """The server's scope for autonomy (its settings and log are the server's, whatever the channel)."""
    return Scope.channel(interaction.guild_id or 0, interaction.channel_id or 0)


class AutonomyCommands(commands.Cog):
    autonomy = app_commands.Group(name="autonomy", description="The persona's own time between conversations",
                                  guild_only=True)
    # Changes in a group of their own: members never see what they would be refused (still checked).
    autonomy_admin = ManagerGroup(name="autonomy-admin", description="Change the persona's own time here "
                                  "(Manage Server)", guild_only=True, default_permissions=MANAGE,
                                  refusal="Changing the persona's own time or running a pulse")

    def __init__(self, bot: commands.Bot):
        self.bot = bot
        self.engine = engine_of(bot)

    @commands.Cog.listener()
    async def on_ready(self) -> None:
        await self.engine.start_pulses()
        for guild in self.bot.guilds:
            await self.engine.pulses.arm(Scope.channel(guild.id, 0))
            await self._prepare_socials(guild.id)

    async def _prepare_socials(self, guild_id: int) -> None:
        """A social branch per other persona bot, in the home channel, made before the first exchange."""
        home = (await self.engine.pulses.status(Scope.channel(guild_id, 0))).home
        personas = self.engine.config.discord.personas
        if home is not None and personas:
            names = {p: (u.display_name if (u := self.bot.get_user(p)) else f"persona {p}") for p in personas}
            await self.engine.socials.prepare(home, names)

    @commands.Cog.listener()
    async def on_guild_join(self, guild: discord.Guild) -> None:
        await self.engine.pulses.arm(Scope.channel(guild.id, 0))

    async def _set(self, interaction: discord.Interaction, changes: dict[str, object]) -> bool:
        try:
            for key, value in changes.items():
                await self.engine.pulses.configure(server(interaction), key, value)
        except Failure as exc:
            await answer(interaction, exc.notice)
            return False
        return True

    @autonomy_admin.command(name="on", description="Let the persona act on its own here (Manage Server)")
    async def on(self, interaction: discord.Interaction) -> None:
        if await self._set(interaction, {"enabled": True}):
            status = await self.engine.pulses.status(server(interaction))
            hint = "" if status.home else " Set its home channel with /autonomy-admin home: no pulse runs without."
            await answer(interaction, "Autonomy is on." + hint)

    @autonomy_admin.command(name="off", description="Stop the persona's pulses here (Manage Server)")
    async def off(self, interaction: discord.Interaction) -> None:
        if await self._set(interaction, {"enabled": False}):
            await answer(interaction, "Autonomy is off: no more pulses here.")

    @autonomy.command(name="status", description="Whether autonomy is on, its home, timer and today's budget")
    async def status(self, interaction: discord.Interaction) -> None:
        scope = server(interaction)
        status = await self.engine.pulses.status(scope)
        now = discord.utils.utcnow().timestamp()
        await answer(interaction, "\n".join(autonomy_lines(status, self.engine.pulses.next_pulse(scope), now)))

    @autonomy_admin.command(name="home", description="The channel autonomous work hangs under (Manage Server)")
    @app_commands.describe(channel="A text channel (default: this one)")
    async def home(self, interaction: discord.Interaction, channel: discord.TextChannel | None = None) -> None:
        target = channel.id if channel is not None else interaction.channel_id
        if not isinstance(interaction.channel, discord.TextChannel) and channel is None:
            await answer(interaction, "The home channel is a text channel: name one, or run this in one.")
            return
        if await self._set(interaction, {"home_channel": target}):
            await self._prepare_socials(interaction.guild_id or 0)
            await answer(interaction, f"Home channel: <#{target}>. Autonomous sessions anchor there, and task "
                                      "threads open under it.")

    @autonomy_admin.command(name="interval", description="Minutes between pulses (Manage Server)")
    async def interval(self, interaction: discord.Interaction, minutes: app_commands.Range[int, 5, 1440],
                       jitter: app_commands.Range[int, 0, 120] | None = None) -> None:
        changes: dict[str, object] = {"interval_minutes": minutes}
        if jitter is not None:
            changes["jitter_minutes"] = jitter
        if await self._set(interaction, changes):
            await answer(interaction, set_text("autonomy.interval_minutes", minutes, "this server"))

    @autonomy_admin.command(name="quiet", description="Hours with no pulse, and how long the home must be quiet "
                                                "(Manage Server)")
    @app_commands.describe(hours="HH:MM-HH:MM, or 'none'", timezone="IANA zone, e.g. Asia/Tokyo",
                           minutes="Minutes the home channel must be quiet before a pulse")
    async def quiet(self, interaction: discord.Interaction, hours: str | None = None, timezone: str | None = None,
                    minutes: app_commands.Range[int, 0, 1440] | None = None) -> None:
        changes: dict[str, object] = {}
        if timezone is not None:
            changes["timezone"] = timezone
        if hours is not None:
            changes["quiet_hours"] = "" if hours.strip().lower() in ("none", "off", "") else hours
        if minutes is not None:
            changes["quiet_minutes"] = minutes
        if not changes:
            await answer(interaction, "Give hours (HH:MM-HH:MM or none), a timezone, or minutes.")
            return
        if await self._set(interaction, changes):
            await answer(interaction, "Quiet settings saved: " + ", ".join(f"{k} = {v or 'none'}"
                                                                          for k, v in changes.items()))

    @autonomy_admin.command(name="budget", description="Model calls and tokens the pulses may spend a day "
                                                       "(Manage Server)")
    async def budget(self, interaction: discord.Interaction, calls: app_commands.Range[int, 0, 10_000],
                     tokens: app_commands.Range[int, 0, 100_000_000] | None = None) -> None:
        changes: dict[str, object] = {"daily_calls": calls, **({"daily_tokens": tokens} if tokens is not None else {})}
        if await self._set(interaction, changes):
            await answer(interaction, f"Daily budget: {calls} model calls"
                                      + (f", {tokens} tokens." if tokens is not None else "."))

    @autonomy.command(name="log", description="What the pulses decided, newest first")
    async def log(self, interaction: discord.Interaction, limit: app_commands.Range[int, 1, 50] = 15) -> None:
        entries = await self.engine.autonomy.log(server(interaction), limit)
        await answer(interaction, "\n".join(autonomy_log_lines(entries, discord.utils.utcnow().timestamp())))

    @autonomy_admin.command(name="pulse-now", description="Run a pulse now, budget permitting (Manage Server)")
    async def pulse_now(self, interaction: discord.Interaction) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        outcome = await self.engine.pulses.pulse_now(server(interaction))
        await answer(interaction, pulse_text(outcome))


async def setup(bot: commands.Bot) -> None:
    await bot.add_cog(AutonomyCommands(bot))
