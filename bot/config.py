"""Configuration: config.yaml, then environment overrides, validated into pydantic models."""

from __future__ import annotations

import difflib
import ipaddress
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_origin
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from memory.database_url import safe_url
from memory.errors import Failure
from memory.settings import ContextSettings, MemoryWorkSettings, ShortTermSettings, StelisSettings

DEFAULT_CONFIG_FILE = Path(__file__).resolve().parent.parent / "config.yaml"

# Variables that keep the names the seeds and the outside world gave them.
ENV_ALIASES: dict[str, str] = {
    "DISCORD_TOKEN": "discord.token",
    "ANTHROPIC_API_KEY": "llm.anthropic.api_key",
    "ANTHROPIC_BASE_URL": "llm.anthropic.base_url",
    "OPENAI_API_KEY": "llm.openai.api_key",
    "OPENAI_BASE_URL": "llm.openai.base_url",
    "DATABASE_URL": "database.url",
    "STELIS_DEFAULT_WINDOW_RATIO": "stelis.default_window_ratio",
    "STELIS_MAX_DEPTH": "stelis.max_depth",
}
# STELIS_* names that are not config keys.
ENV_RESERVED = {"STELIS_CONFIG"}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class DiscordConfig(_Model):
    token: SecretStr | None = Field(None, description=(
        "Bot token. Leave empty here and set DISCORD_TOKEN instead; with no token `make run` opens the console "
        "chat."))
    command_prefix: str = Field("!", min_length=1, max_length=5,
                                description="Prefix for owner text commands such as !sync.")
    sharded: bool = Field(False, description=(
        "Use AutoShardedBot (only for very large bots): all shards in this process unless `shards` names some."))
    shards: str = Field("", description=(
        "The shards this process runs, as a range or list (0-3, or 0,2), with shard_count; empty: all. A "
        "server's events always go to shard (guild_id >> 22) % shard_count, direct messages to shard 0."))
    shard_count: int | None = Field(None, ge=1, le=100_000, description=(
        "Shards across all processes (required with `shards`); null: Discord's recommendation."))
    reply_policy: Literal["off", "listen", "mention", "chat"] = Field("mention", description=(
        "Where the persona speaks: off (ignore the channel), listen (remember, never answer), mention (answer "
        "mentions and replies to the bot), chat (answer everything)."))
    personas: list[int] = Field(default_factory=list, description=(
        "User ids of other persona bots whose messages are remembered and answered like people's."))
    dms: Literal["answer", "listen", "off"] = Field("answer", description=(
        "Direct messages: answer them, listen (remember, never answer) or off (ignore them)."))
    cooldown_seconds: int = Field(0, ge=0, le=3_600, description=(
        "Seconds a person waits between answered messages in a channel (0: none); a message in the wait is "
        "remembered, marked with a reaction, and not answered."))
    allow_users: list[int] = Field(default_factory=list, description=(
        "If not empty, only these users are answered (their messages are remembered either way). /access."))
    allow_roles: list[int] = Field(default_factory=list, description=(
        "If not empty, only members with one of these roles are answered (besides allow_users). /access."))
    deny_users: list[int] = Field(default_factory=list, description="Users never answered. /access.")
    deny_roles: list[int] = Field(default_factory=list, description="Members with these roles are never answered.")

    @field_validator("shards")
    @classmethod
    def _shard_list(cls, value: str) -> str:
        if value.strip() and shard_ids(value) is None:
            raise ValueError("write shards as a range (0-3) or a list (0,2,5) of shard numbers")
        return value.strip()

    @model_validator(mode="after")
    def _shards_fit(self) -> DiscordConfig:
        ids = shard_ids(self.shards) if self.shards else None
        if ids and self.shard_count is None:
            raise ValueError("discord.shards needs discord.shard_count (the shards across all processes)")
        if ids and self.shard_count is not None and max(ids) >= self.shard_count:
            raise ValueError(f"discord.shards {self.shards} goes past shard_count {self.shard_count} "
                             f"(shards are numbered 0 to {self.shard_count - 1})")
        return self


def shard_ids(text: str) -> list[int] | None:
    """"0-3" or "0,2,5" as shard numbers; None when malformed."""
    ids: set[int] = set()
    for part in text.replace(" ", "").split(","):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and (not high.isdigit() or int(high) < int(low))):
            return None
        ids.update(range(int(low), int(high) + 1) if dash else [int(low)])
    return sorted(ids)


class _Endpoint(_Model):
    api_key: SecretStr | None = Field(None, description="The key, if the endpoint needs one; prefer the variable.")
    base_url: str | None = Field(None, description="Another server that speaks this API; null for the default.")


class AnthropicConfig(_Endpoint):
    """Anthropic's Messages API (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL)."""

    timeout_seconds: float = Field(60.0, gt=0, le=3_600, description="Seconds before one request is abandoned.")
    max_retries: int = Field(3, ge=0, le=10, description="Retries with exponential back-off on 429, 5xx and 529.")
    stream: bool = Field(True, description=(
        "Stream replies (needed for long outputs; the console shows text as it arrives)."))


LOCAL_TIMEOUT = 900.0  # a small model on a CPU takes minutes for a long prompt (shared/findings/real-models.md)


class OpenAIConfig(_Endpoint):
    """Any OpenAI-compatible endpoint, e.g. http://localhost:11434/v1 for Ollama (OPENAI_API_KEY, OPENAI_BASE_URL)."""

    timeout_seconds: float | None = Field(None, gt=0, le=3_600, description=(
        "Seconds before one request is abandoned; default 60 for a server on the internet, 900 for one on this "
        "machine or its network (a small model on a CPU takes minutes)."))
    max_retries: int | None = Field(None, ge=0, le=10, description=(
        "Retries with back-off on 429 and 5xx; default 3 for a server on the internet, 0 for a local one (it "
        "keeps computing an abandoned request, so a retry only queues behind it)."))
    tools: Literal["auto", "yes", "no"] = Field("auto", description=(
        "Does the served model call tools (recall while replying, a playbook step's tools)? auto: ask the server "
        "(llama.cpp's /props, Ollama's /api/show; llama-cpp-python's chat templates drop tools: no). Without "
        "tools, recall still brings what the conversation needs into each request."))

    def local(self) -> bool:
        """Is the server on this machine or its network (a compose service, a private address)?"""
        return is_local(self.base_url)

    def timeout(self) -> float:
        return self.timeout_seconds or (LOCAL_TIMEOUT if self.local() else 60.0)

    def retries(self) -> int:
        return self.max_retries if self.max_retries is not None else (0 if self.local() else 3)


def is_local(url: str | None) -> bool:
    """A loopback or private address, localhost, or a bare host name (a compose service)."""
    host = urlsplit(url or "").hostname or ""
    if host == "localhost" or host.endswith((".local", ".internal")) or (host and "." not in host and ":" not in host):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


class ModelPrice(_Model):
    """US dollars per million tokens of one kind."""

    input: float = Field(0.0, ge=0)
    output: float = Field(0.0, ge=0)
    cache_read: float = Field(0.0, ge=0)
    cache_write: float = Field(0.0, ge=0)


DEFAULT_PRICES = {  # list prices per million tokens when this was written; an operator's own go in config
    "claude-opus": ModelPrice(input=5, output=25, cache_read=0.5, cache_write=6.25),
    "claude-sonnet": ModelPrice(input=3, output=15, cache_read=0.3, cache_write=3.75),
    "claude-haiku": ModelPrice(input=1, output=5, cache_read=0.1, cache_write=1.25),
}


class LLMConfig(_Model):
    provider: Literal["auto", "anthropic", "openai", "offline"] = Field("auto", description=(
        "auto: Anthropic when ANTHROPIC_API_KEY is set, the offline model otherwise. anthropic | openai (any "
        "OpenAI-compatible endpoint; needs the `openai` extra) | offline."))
    context_tokens: int = Field(200_000, ge=2_048, le=2_000_000, description=(
        "The model's context window in tokens. Everything a request carries is planned inside it: the reply's "
        "reserve, the persona card, memory, the conversation, recall. Left unset with an OpenAI-compatible "
        "server, the server is asked (llama.cpp, vLLM, Ollama); one that does not say keeps this default."))
    max_output_tokens: int = Field(1_024, ge=16, le=64_000, description=(
        "Tokens reserved for each reply, below context_tokens; at most a quarter of context_tokens is reserved, "
        "so a small local model keeps room for the conversation."))
    reply_tools: bool = Field(True, description=(
        "The persona may call recall and recall_thread while replying, when it needs to remember more "
        "(Anthropic and OpenAI-compatible providers; the offline model never calls tools). Every request that "
        "shares the conversation's cache offers the same tools."))
    anthropic: AnthropicConfig = AnthropicConfig()
    openai: OpenAIConfig = OpenAIConfig()
    prices: dict[str, ModelPrice] = Field(default_factory=lambda: dict(DEFAULT_PRICES), description=(
        "Estimated cost in /usage and the dashboard: US dollars per million tokens (input, output, cache_read, "
        "cache_write) by model name or its beginning (the longest that fits wins); a model not listed shows no "
        "cost. The defaults are list prices when this was written: check them against your bill."))

    @model_validator(mode="after")
    def _room_for_input(self) -> LLMConfig:
        if self.max_output_tokens >= self.context_tokens:
            raise ValueError(f"llm.max_output_tokens ({self.max_output_tokens}) must be below llm.context_tokens "
                             f"({self.context_tokens}): the request itself needs room")
        return self

    @model_validator(mode="after")
    def _keys_present(self) -> LLMConfig:
        if self.provider == "anthropic" and self.anthropic.api_key is None:
            raise ValueError("llm.provider is 'anthropic' but no key is set (set ANTHROPIC_API_KEY)")
        if self.provider == "openai" and self.openai.base_url is None:
            raise ValueError("llm.provider is 'openai' but llm.openai.base_url is not set (OPENAI_BASE_URL)")
        return self

    def resolved_provider(self) -> Literal["anthropic", "openai", "offline"]:
        """`auto` means Anthropic when a key is set, the offline model otherwise."""
        if self.provider != "auto":
            return self.provider
        return "anthropic" if self.anthropic.api_key is not None else "offline"


class ModelTiers(_Model):
    standard: str = Field("claude-sonnet-5-5", min_length=1, description=(
        "Model for replies and chronicles; a server may choose its own for replies (/model)."))
    light: str = Field("claude-haiku-5-5", min_length=1, description="Cheaper model for summaries and small jobs.")


MAX_NAME = 80


class PersonaConfig(_Model):
    name: str = Field("Stelis", min_length=1, max_length=MAX_NAME, description=(
        "The persona's name. Its memories are kept under the name config.yaml gives; a server or a channel may "
        "give it another name there (/config set, or a character card imported there), which its prompts use."))
    card: str = Field(
        "You are {name}, a warm and curious companion who lives in this Discord server.\n"
        "You remember conversations across days and speak naturally and briefly.\n",
        min_length=1, description=(
            "The persona card: who the persona is. Goes first in every prompt (cached). {name} stands for "
            "persona.name, so renaming the persona (STELIS_PERSONA_NAME) renames it here too."))
    models: ModelTiers = ModelTiers()

    _template: str = PrivateAttr("")  # the card as written, {name} kept: another name fills it again

    @model_validator(mode="after")
    def _named(self) -> PersonaConfig:
        self._template = self._template or self.card  # the assignment below validates (and comes here) again
        if "{name}" in self.card:
            self.card = self.card.replace("{name}", self.name)
        return self

    @property
    def template(self) -> str:
        return self._template or self.card


class SnapshotConfig(_Model):
    interval_seconds: int = Field(300, ge=0, le=86_400, description=(
        "Seconds between context snapshots under data_dir/snapshots; 0 writes them only at shutdown."))


class PlaybooksConfig(_Model):
    """Playbooks: JSON workflows the persona runs (/playbooks)."""

    folder: Path | None = Field(None, description=(
        "A folder of the operator's own playbooks (*.json), loaded beside the built-in ones (a relative one is "
        "beside the config file); a playbook that fails the check does not load, and the log says why."))
    subagent_depth: int = Field(2, ge=0, le=5, description=(
        "How deep sub-playbooks run as subagents (each in a temporary thread) may nest."))


class AutonomyConfig(_Model):
    """The autonomous pulse (seed 001): between conversations the persona looks around, decides, and works on
    its branches. Off by default; a server admin turns it on (/autonomy-admin on) and sets a home channel."""

    enabled: bool = Field(False, description="Let the persona act on its own in this server.")
    home_channel: int | None = Field(None, description=(
        "The channel whose conversation is the parent of every autonomous session (Discord: /autonomy-admin home)."))
    interval_minutes: int = Field(60, ge=5, le=1_440, description="Minutes between pulses.")
    jitter_minutes: int = Field(10, ge=0, le=120, description=(
        "Each pulse comes up to this many minutes early or late, so pulses do not land on the clock."))
    quiet_minutes: int = Field(15, ge=0, le=1_440, description=(
        "A pulse runs only when the home channel has been quiet this long: people come first."))
    quiet_hours: str = Field("", description=(
        "Hours with no pulse, as HH:MM-HH:MM in `timezone` (may cross midnight, e.g. 23:00-07:00); empty for "
        "none."))
    timezone: str = Field("UTC", description="The IANA time zone quiet hours and the daily budget count in.")
    daily_calls: int = Field(40, ge=0, le=10_000, description="Model calls the pulses may make per day.")
    daily_tokens: int = Field(400_000, ge=0, le=100_000_000, description=(
        "Input and output tokens the pulses may spend per day."))
    session_turns: int = Field(4, ge=1, le=50, description=(
        "Turns the persona may take in one autonomous session (a task's work, a social exchange)."))

    @field_validator("quiet_hours")
    @classmethod
    def _hours(cls, value: str) -> str:
        if value.strip() and quiet_span(value) is None:
            raise ValueError("write quiet hours as HH:MM-HH:MM, for example 23:00-07:00 (or leave empty)")
        return value.strip()

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{value!r} is not an IANA time zone (for example Europe/Paris, Asia/Tokyo, UTC)") \
                from None
        return value


def quiet_span(text: str) -> tuple[int, int] | None:
    """Quiet hours "HH:MM-HH:MM" as minutes of the day (start, end); None if malformed."""
    found = re.fullmatch(r"\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*", text)
    if not found:
        return None
    h1, m1, h2, m2 = (int(g) for g in found.groups())
    if h1 > 23 or h2 > 23 or m1 > 59 or m2 > 59:
        return None
    return h1 * 60 + m1, h2 * 60 + m2


class MetricsConfig(_Model):
    """Prometheus metrics at http://host:port/metrics, per process (the Discord bot)."""

    port: int | None = Field(None, ge=0, le=65_535, description=(
        "Port for /metrics; null: no endpoint; 0: any free port (logged)."))
    host: str = Field("127.0.0.1", min_length=1, description=(
        "Address to listen on; 0.0.0.0 to let a Prometheus outside this machine (or container) scrape."))


class DashboardConfig(_Model):
    """The admin's web dashboard (memory over time, the next request, threads, the pulse, people), served by the
    bot itself. Discord's /dashboard (Manage Server) gives a one-time sign-in link; the console prints its own."""

    enabled: bool = Field(False, description="Serve the dashboard.")
    host: str = Field("127.0.0.1", min_length=1, description=(
        "Address to listen on; keep 127.0.0.1 and put a reverse proxy in front to reach it from elsewhere."))
    port: int = Field(8770, ge=0, le=65_535, description="Port to listen on; 0: any free port (logged).")
    public_url: str | None = Field(None, description=(
        "The address people open (behind a reverse proxy: https://stelis.example.org); default http://host:port."))
    sign_in_minutes: int = Field(10, ge=1, le=60, description="How long a sign-in link works (once).")
    session_hours: int = Field(8, ge=1, le=168, description="How long a signed-in session lasts.")
    secret: SecretStr | None = Field(None, description=(
        "Key that signs links and sessions; unset: a new random key at each start (everyone signs in again)."))


class DatabaseConfig(_Model):
    """Where memory lives: one SQLite file (the default, nothing to set up), or a shared PostgreSQL."""

    file: str = Field("stelis.sqlite3", min_length=1, description=(
        "SQLite database file name inside data_dir (WAL), used when no url is set."))
    url: SecretStr | None = Field(None, description=(
        "postgresql://user:password@host:5432/dbname to share one PostgreSQL among bot processes (sharding); "
        "or set DATABASE_URL. The database needs the pg_trgm extension (trusted since PostgreSQL 13) and a "
        "UTF-8 locale other than C."))
    pool_size: int = Field(10, ge=2, le=200, description=(
        "PostgreSQL connections this process opens at start and keeps, a quarter of them (at least one) for "
        "recall's look-ups. Each reply holds one for a moment while it reads. On two cores shared with the "
        "database, 100 channels answered at once took 1.13-1.17x a bare loop with 10 and 1.21-1.22x with 20 "
        "(bench concurrency, connections then opened as needed: fewer server processes taking turns on the "
        "cores); raise it where the database has cores of its own or is farther away. PostgreSQL allows 100 by "
        "default, shared by every process."))

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(("postgresql://", "postgres://")):
            raise ValueError("must start with postgresql:// (leave it empty for the SQLite file)")
        return value or None


class ConsoleConfig(_Model):
    user_name: str | None = Field(None, min_length=1, max_length=80, description=(
        "Your name in the console chat, as the persona and its memory know you; unset: your login name. (Not "
        "\"you\": in the persona's memory that would read as its own words.)"))


class Config(_Model):
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description=(
        "Logging level: DEBUG, INFO, WARNING or ERROR. Secrets are never logged."))
    log_format: Literal["text", "json"] = Field("text", description=(
        "Log lines as text, or as one JSON object each (with guild, channel, thread and run ids), for a collector."))
    data_dir: Path = Field(Path("data"), description=(
        "Directory for the database and snapshots; a relative one is beside the config file (the working "
        "directory when there is none)."))
    companions: list[Path] = Field(default_factory=list, description=(
        "Other personas this process runs beside this one on Discord: each a config file with its own "
        "persona.name, discord.token and data_dir (or database.url); relative paths are beside this file. Each "
        "bot answers the others as persona bots. STELIS_*, DISCORD_TOKEN and DATABASE_URL are this persona's only."))
    database: DatabaseConfig = DatabaseConfig()
    discord: DiscordConfig = DiscordConfig()
    llm: LLMConfig = LLMConfig()
    persona: PersonaConfig = PersonaConfig()
    stelis: StelisSettings = StelisSettings()
    context: ContextSettings = ContextSettings()
    console: ConsoleConfig = ConsoleConfig()
    playbooks: PlaybooksConfig = PlaybooksConfig()
    autonomy: AutonomyConfig = AutonomyConfig()
    metrics: MetricsConfig = MetricsConfig()
    dashboard: DashboardConfig = DashboardConfig()
    snapshots: SnapshotConfig = SnapshotConfig()
    short_term_history: ShortTermSettings = ShortTermSettings()
    memory: MemoryWorkSettings = MemoryWorkSettings()

    @field_validator("log_level", mode="before")
    @classmethod
    def _any_case(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("database", mode="before")
    @classmethod
    def _file_name(cls, value: object) -> object:
        return {"file": value} if isinstance(value, str) else value  # older configs named the file alone

    @field_validator("data_dir", mode="before")
    @classmethod
    def _not_empty(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            raise ValueError("must name a directory (an empty value would put the data in the current directory)")
        return value

    @property
    def database_path(self) -> Path:
        return self.data_dir / self.database.file

    @property
    def database_target(self) -> str | Path:
        """The PostgreSQL URL when one is set, else the SQLite file."""
        url = self.database.url
        return url.get_secret_value() if url is not None else self.database_path

    @property
    def database_name(self) -> str:
        """Where the memory is, fit to print: the file, or the server without its password."""
        url = self.database.url
        return safe_url(url.get_secret_value()) if url is not None else str(self.database_path)

    def secrets(self) -> list[str]:
        """Every secret value set, so logging can scrub them."""
        found = [self.discord.token, self.llm.anthropic.api_key, self.llm.openai.api_key, self.database.url]
        values = [s.get_secret_value() for s in found if s is not None and s.get_secret_value()]
        password = urlsplit(self.database.url.get_secret_value()).password if self.database.url else None
        return [*values, *([password] if password else [])]  # a driver's message may quote the password alone


Where = Literal["guild", "channel"]
EITHER: tuple[Where, ...] = ("guild", "channel")
SERVER: tuple[Where, ...] = ("guild",)  # what a pulse or a server's budget reads: one value per server

# What a server admin may override, and at which levels (Red's register_guild / register_channel): a server
# ("guild"), or one of its channels. A conversation outside any server (a DM, the console) is its own top
# level: there a server's setting is set on the conversation. The rest belongs to config.yaml.
SCOPES: dict[str, tuple[Where, ...]] = {
    "discord.reply_policy": EITHER, "persona.name": EITHER, "persona.card": EITHER, "persona.models.standard": EITHER,
    "short_term_history.enabled": EITHER, "short_term_history.max_history_count": EITHER,
    "short_term_history.conversation_idle_seconds": EITHER, "short_term_history.message_threshold": EITHER,
    "stelis.max_depth": EITHER, "stelis.default_window_ratio": EITHER, "memory.shared_channels": EITHER,
    "memory.tier": EITHER, "discord.cooldown_seconds": EITHER, "discord.allow_users": EITHER,
    "discord.allow_roles": EITHER, "discord.deny_users": EITHER, "discord.deny_roles": EITHER,
    "autonomy.enabled": SERVER, "autonomy.home_channel": SERVER, "autonomy.interval_minutes": SERVER,
    "autonomy.jitter_minutes": SERVER, "autonomy.quiet_minutes": SERVER, "autonomy.quiet_hours": SERVER,
    "autonomy.timezone": SERVER, "autonomy.daily_calls": SERVER, "autonomy.daily_tokens": SERVER,
    "autonomy.session_turns": SERVER,
}
OVERRIDABLE = tuple(SCOPES)


def settable(key: str, where: Where, guild_id: int | None) -> bool:
    """May `key` be overridden at this level (a channel of server `guild_id`, None: outside any server)?"""
    return key in SCOPES and (where in SCOPES[key] or (where == "channel" and guild_id is None))


# Settings whose values name things of a Discord server: each is checked against the server it is set in.
NAMES: dict[str, Literal["channel", "role", "user"]] = {
    "autonomy.home_channel": "channel", "discord.allow_users": "user", "discord.deny_users": "user",
    "discord.allow_roles": "role", "discord.deny_roles": "role",
}


class ConfigError(Failure):
    """A config that cannot be used; the message names each bad key, its value and what is allowed."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid configuration:\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass
class LoadedConfig:
    config: Config
    source: Path | None
    env_overrides: dict[str, str] = field(default_factory=dict)  # dotted key -> variable name
    warnings: list[str] = field(default_factory=list)


def load_config(path: Path | None = None, environ: Mapping[str, str] | None = None) -> LoadedConfig:
    """Read the YAML file, apply environment overrides, validate; raise ConfigError on any bad value."""
    environ = os.environ if environ is None else environ
    if path is None and environ.get("STELIS_CONFIG"):
        path = Path(environ["STELIS_CONFIG"])
    if path is None and DEFAULT_CONFIG_FILE.exists():
        path = DEFAULT_CONFIG_FILE
    raw = _read_yaml(path) if path is not None else {}
    overrides, warnings = _env_overrides(environ)
    for dotted, (_, value) in overrides.items():
        _set_dotted(raw, dotted, value)
    sources = {dotted: var for dotted, (var, _) in overrides.items()}
    config = validate(raw, sources)
    if path is not None:
        config = _beside(config, path.resolve().parent)
    return LoadedConfig(config, path, sources, warnings)


def _beside(config: Config, folder: Path) -> Config:
    """Relative folders name places beside the config file, wherever the bot was started from: started from
    another directory, it must not open a new, empty memory."""
    update: dict[str, Any] = {}
    if not config.data_dir.is_absolute():
        update["data_dir"] = folder / config.data_dir
    own = config.playbooks.folder
    if own is not None and not own.is_absolute():
        update["playbooks"] = config.playbooks.model_copy(update={"folder": folder / own})
    if any(not path.is_absolute() for path in config.companions):
        update["companions"] = [folder / path for path in config.companions]
    return config.model_copy(update=update) if update else config


def validate(raw: dict[str, Any], sources: Mapping[str, str] | None = None) -> Config:
    try:
        return Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError([_describe(err, raw, sources or {}) for err in exc.errors()]) from None


def apply_overrides(base: Config, overrides: Mapping[str, Any]) -> Config:
    """Layer per-guild or per-channel settings on the base config, validated like the file."""
    unknown = [k for k in overrides if k not in flat_keys()]
    if unknown:
        raise ConfigError([f"{k}: unknown key{_suggest(k, flat_keys())}" for k in unknown])
    raw = base.model_dump(mode="python")
    _unwrap_secrets(raw)
    raw["persona"]["card"] = base.persona.template  # a name given here fills the card's {name} too
    for dotted, value in overrides.items():
        _set_dotted(raw, dotted, value)
    return validate(raw, {k: "override" for k in overrides})


def dotted_value(config: Config, dotted: str) -> Any:
    """One setting's value by its dotted key."""
    node: Any = config
    for part in dotted.split("."):
        node = getattr(node, part)
    return node.get_secret_value() if isinstance(node, SecretStr) else node


def flat_keys(model: type[BaseModel] = Config, prefix: str = "") -> list[str]:
    """Every leaf key as a dotted path."""
    keys = []
    for name, info in model.model_fields.items():
        sub = info.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            keys.extend(flat_keys(sub, f"{prefix}{name}."))
        else:
            keys.append(prefix + name)
    return keys


def masked_dump(config: Config) -> dict[str, Any]:
    """The effective config as plain data with every secret shown as '***'."""
    def walk(value: Any) -> Any:
        if isinstance(value, SecretStr):
            return "***" if value.get_secret_value() else ""
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, Path):
            return str(value)
        return value

    dumped: dict[str, Any] = walk(config.model_dump(mode="python"))
    return dumped


MAX_CONFIG_BYTES = 256 * 1024  # a config is a page of settings; anything near this is a mistake or an attack
MAX_SHOWN_VALUE = 80  # characters of a bad value quoted back in an error


def shown_value(value: Any) -> str:
    """A value as an error quotes it: its repr, cut short so no error text can grow with its input."""
    text = repr(value)
    return text if len(text) <= MAX_SHOWN_VALUE else text[:MAX_SHOWN_VALUE] + f"… ({len(text)} characters)"


class _StrictLoader(yaml.SafeLoader):
    """Safe YAML without aliases (an alias bomb expands a few bytes into gigabytes) or duplicate keys."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]  # PyYAML's stubs leave it untyped
            raise yaml.constructor.ConstructorError(None, None, "aliases (*name) are not allowed in the config",
                                                    event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} appears twice",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError([f"{path} is {path.stat().st_size} bytes; a config file may be at most "
                               f"{MAX_CONFIG_BYTES} bytes"])
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"cannot read config file {path}: {exc.strerror}"]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{path} is not UTF-8 text (byte {exc.start})"]) from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError([f"{path} is not valid YAML: {_clip(str(exc))}"]) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError([f"{path} must hold a mapping of keys at the top, not {type(data).__name__}"])
    return data


def _env_overrides(environ: Mapping[str, str]) -> tuple[dict[str, tuple[str, str]], list[str]]:
    """Map environment variables onto dotted keys: aliases first, then STELIS_SECTION_KEY."""
    keys = flat_keys()
    by_env = {"STELIS_" + k.replace(".", "_").upper(): k for k in keys}
    found: dict[str, tuple[str, str]] = {}
    warnings = []
    for var, value in environ.items():
        if var in ENV_ALIASES:
            if value.strip():  # compose and shells pass unset secrets as empty strings
                found[ENV_ALIASES[var]] = (var, value)
        elif var in by_env:
            found[by_env[var]] = (var, _from_env(by_env[var], value))
        elif var.startswith("STELIS_") and var not in ENV_RESERVED:
            hint = difflib.get_close_matches(var, [*by_env, *ENV_ALIASES], n=1)
            tip = f" (did you mean {hint[0]}?)" if hint else ""
            warnings.append(f"ignored {var}: not a config key{tip}")
    return found, warnings


def _from_env(dotted: str, value: str) -> Any:
    """A variable's text as its setting takes it: a list from `123,456` or JSON `[123, 456]`, the rest as written
    (the models convert numbers and flags; a JSON list that does not parse is left for them to name)."""
    info = _field(dotted.split("."))
    if info is None or get_origin(info.annotation) not in (list, set, tuple):
        return value
    text = value.strip()
    if text.startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return value
    return [item.strip() for item in text.split(",") if item.strip()]


def _field(loc: list[str]) -> FieldInfo | None:
    """The declaration of the setting at `loc` (dotted key parts), or None where no setting is."""
    model: type[BaseModel] = Config
    info = None
    for part in loc:
        info = model.model_fields.get(part)
        if info is None:
            return None
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            model = info.annotation
    return info


def _clip(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _set_dotted(raw: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = raw
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[leaf] = value


def _unwrap_secrets(raw: dict[str, Any]) -> None:
    for key, value in raw.items():
        if isinstance(value, SecretStr):
            raw[key] = value.get_secret_value()
        elif isinstance(value, dict):
            _unwrap_secrets(value)


def _describe(err: Mapping[str, Any], raw: dict[str, Any], sources: Mapping[str, str]) -> str:
    loc = [str(p) for p in err["loc"]]
    dotted = ".".join(loc) or "(top level)"
    source = next((sources[k] for k in (dotted, ".".join(loc[:-1])) if k in sources), None)  # a list's item too
    origin = f" (from {source})" if source else ""
    if err["type"] == "extra_forbidden":
        parent = ".".join(loc[:-1])
        siblings = [k[len(parent) + 1:] if parent else k for k in flat_keys() if k.startswith(parent)]
        return f"{dotted}: unknown key{_suggest(loc[-1], siblings)}"
    msg = str(err["msg"]).removeprefix("Value error, ")
    value = _get_dotted(raw, loc)
    if err["type"] == "value_error" and isinstance(value, dict | None):
        return msg  # a rule across keys: its message names them
    if dotted == "database.url" and isinstance(value, str):
        shown = repr(safe_url(value))  # where it points helps; its password never shows
    else:
        shown = "***" if _is_secret(dotted) else shown_value(value)
    allowed = _allowed_range(loc)
    return f"{dotted} = {shown}{origin}: {msg}" + (f" (allowed: {allowed})" if allowed else "")


def _allowed_range(loc: list[str]) -> str:
    """The numeric or length bounds declared on a field, written as one range."""
    info = _field(loc)
    if info is None:
        return ""
    low = high = ""
    for m in info.metadata:
        for attr, sign in (("gt", "<"), ("ge", "<=")):
            if getattr(m, attr, None) is not None:
                low = f"{getattr(m, attr)} {sign} "
        for attr, sign in (("lt", "<"), ("le", "<=")):
            if getattr(m, attr, None) is not None:
                high = f" {sign} {getattr(m, attr)}"
        if getattr(m, "min_length", None) is not None:
            low = f"{m.min_length} <= "
        if getattr(m, "max_length", None) is not None:
            high = f" <= {m.max_length}"
    subject = "length" if "length" in repr(info.metadata) else "value"
    return f"{low}{subject}{high}" if low or high else ""


def _suggest(name: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=1)
    return f" (did you mean {close[0]}?)" if close else f"; allowed: {', '.join(sorted(candidates))}"


def _is_secret(dotted: str) -> bool:
    return dotted.endswith(("token", "api_key"))


def _get_dotted(raw: Any, loc: list[str]) -> Any:
    for part in loc:
        if isinstance(raw, dict) and part in raw:
            raw = raw[part]
        elif isinstance(raw, list) and part.isdecimal() and int(part) < len(raw):
            raw = raw[int(part)]  # "discord.personas.0": an item of a list
        else:
            return None
    return raw

