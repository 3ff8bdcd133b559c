"""Several personas from one process (config `companions`): each its own config, bot and memory, and each
knowing the others as persona bots."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bot.config import Config, ConfigError, load_config

# What names one persona's own things: its token, its data and database, its STELIS_* settings. Model keys
# (ANTHROPIC_API_KEY, OPENAI_BASE_URL...) serve every persona.
OWN_VARIABLES = ("STELIS_", "DISCORD_TOKEN", "DATABASE_URL")


def load_companions(config: Config, environ: Mapping[str, str]) -> list[Config]:
    """The companions' configs, checked to be other personas with their own token and memory; ConfigError
    names every problem."""
    shared = {k: v for k, v in environ.items() if not k.startswith(OWN_VARIABLES)}
    found, problems = [], []
    for path in config.companions:
        try:
            found.append(load_config(path, shared).config)
        except ConfigError as exc:
            problems += [f"companions: {path}: {p}" for p in exc.problems]
    if problems:
        raise ConfigError(problems)
    for n, (path, companion) in enumerate(zip(config.companions, found, strict=True)):
        problems += [f"companions: {path}: {p}" for p in _clashes(companion, [config, *found[:n]])]
    if problems:
        raise ConfigError(problems)
    return found


def _clashes(companion: Config, before: Sequence[Config]) -> list[str]:
    """What this companion shares with a persona listed before it: a name, a token, a database."""
    problems = []
    if companion.companions:
        problems.append("lists companions of its own: list every persona in the first config")
    if companion.discord.token is None:
        problems.append("has no discord.token: each persona is its own Discord bot (DISCORD_TOKEN is the first's)")
    for other in before:
        if companion.persona.name == other.persona.name:
            problems.append(f"is the persona {other.persona.name!r} again: memory is kept under the name")
        if companion.database_name == other.database_name or (
                companion.database.url is None and companion.database_path.resolve() == other.database_path.resolve()):
            problems.append(f"uses {other.database_name} too: give it its own data_dir or database.url")
        if companion.discord.token is not None and other.discord.token is not None and (
                companion.discord.token.get_secret_value() == other.discord.token.get_secret_value()):
            problems.append("has the same discord.token as another persona: one bot cannot be two")
    return problems


def introduce(bots: Sequence[tuple[Config, int | None]]) -> None:
    """Each persona answers the others as persona bots (discord.personas); a bot's user id is known once it
    has logged in (None until then)."""
    for config, own in bots:
        known = config.discord.personas
        known += [uid for _, uid in bots if uid is not None and uid != own and uid not in known]
