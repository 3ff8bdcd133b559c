"""`stelis [run|console|duet|check-config|config-template|playbooks|snapshot|...]` (or `python -m bot ...`)."""

from __future__ import annotations

import argparse
import gc
import getpass
import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from bot import event_loop, logs
from bot.companions import load_companions
from bot.config import Config, ConfigError, LoadedConfig, load_config, masked_dump
from memory.errors import Failure

log = logging.getLogger("stelis")


def _version() -> str:
    from importlib import metadata  # tens of ms that only --version needs

    try:
        return metadata.version("stelis")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


class _Version(argparse.Action):
    """`--version`, looked up only when asked: finding the installed package costs every start tens of ms."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(f"stelis {_version()}")
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    """Every command, its --help describing it; the common options work before or after the command."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", type=Path, default=argparse.SUPPRESS,
                        help="config file (default: STELIS_CONFIG or config.yaml)")
    common.add_argument("--shards", default=argparse.SUPPRESS,
                        help="the Discord shards this process runs, e.g. 0-3 (discord.shards)")
    common.add_argument("--shard-count", type=int, default=argparse.SUPPRESS,
                        help="shards across all processes (discord.shard_count)")
    parser = argparse.ArgumentParser(prog="stelis", description="Stelis persona bot (python -m bot works too)",
                                     parents=[common])
    parser.add_argument("--version", action=_Version, help="show the version and exit")
    sub = parser.add_subparsers(dest="command")

    def command(name: str, text: str, within: Any = sub) -> argparse.ArgumentParser:
        return cast(argparse.ArgumentParser, within.add_parser(name, help=text, description=text, parents=[common]))

    command("run", "Discord when DISCORD_TOKEN is set, else the console (default)")
    command("console", "chat with the persona in this terminal")
    command("discord", "the Discord bot only: stops with an error when DISCORD_TOKEN is not set (the container's "
            "command)")
    command("health", "exit 0 while the Discord bot is connected (its heartbeat is fresh), 1 otherwise")
    duet = command("duet", "two personas (this config and another) talk in one conversation, each exchange a new "
                   "session of their social branches; offline unless --live")
    duet.add_argument("other", type=Path, help="the second persona's config file (its own persona.name and data_dir)")
    duet.add_argument("--turns", type=int, default=4, help="turns per exchange at most (default 4)")
    duet.add_argument("--exchanges", type=int, default=2, help="exchanges to run (default 2)")
    duet.add_argument("--opening", default="Hello! What have you been up to?", help="the first persona's opening")
    duet.add_argument("--live", action="store_true", help="use the configured models instead of the offline one")
    move = command("migrate", "copy a whole database into another (SQLite to PostgreSQL, or back): ids, versions, "
                   "branches, settings; counts compared; run again to finish a stopped copy")
    move.add_argument("--from", dest="source", required=True,
                      help="sqlite:///data/stelis.sqlite3 (or a file path) or postgresql://...")
    move.add_argument("--to", dest="target", required=True,
                      help="postgresql://user:password@host/db (or a SQLite file)")
    work = command("memory-worker", "run memory updates only, no chat: one of several processes sharing a "
                   "PostgreSQL database (each claims different conversations)")
    work.add_argument("--until-idle", action="store_true", help="stop once nothing is due instead of running on")
    command("check-config", "print the effective config (secrets masked); non-zero if invalid")
    command("config-template", "print config.yaml as the settings models define it (every key, its description, "
            "range and default)")
    books = command("playbooks", "list the playbooks, or check one file (or all) without running")
    books_sub = books.add_subparsers(dest="action", required=True)
    command("list", "the playbooks that load, with what they do", books_sub)
    check = command("check", "the static check: non-zero and every problem if any", books_sub)
    check.add_argument("file", type=Path, nargs="?", help="a playbook file (default: every loaded folder)")
    snap = command("snapshot", "export or import a thread's context snapshot (JSON)")
    snap_sub = snap.add_subparsers(dest="action", required=True)
    export = command("export", "write a thread's snapshot", snap_sub)
    export.add_argument("thread", type=thread_id, help="thread id, as /tree in the console shows it (12 or stelis:12)")
    export.add_argument("--out", type=Path, help="file to write, '-' for standard output "
                        "(default: <data_dir>/snapshots/thread-<id>.json)")
    restore = command("import", "restore snapshots into an empty database", snap_sub)
    restore.add_argument("files", type=Path, nargs="+")
    return parser


def thread_id(text: str) -> int:
    """A thread id as typed: `12`, or `stelis:12` as /tree prints it."""
    number = text.rpartition(":")[2]
    if not (number.isascii() and number.isdecimal()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a thread id (a number, or persona:number as /tree shows)")
    return int(number)


def cli() -> int:
    """The `stelis` command: main(), quiet when its reader stops early (`stelis check-config | head`)."""
    try:
        return main()
    except BrokenPipeError:
        # The reader is gone: point stdout at nothing, or the interpreter's own flush at exit fails again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    args.config = getattr(args, "config", None)
    args.shards = getattr(args, "shards", None)
    args.shard_count = getattr(args, "shard_count", None)
    if args.command == "config-template":  # needs no config: it writes one
        from bot.config_file import render

        print(render(), end="")
        return 0

    environ = dict(os.environ)
    if args.shards is not None:  # flags are read like the variables they stand for: one validation, one message
        environ["STELIS_DISCORD_SHARDS"] = args.shards
    if args.shard_count is not None:
        environ["STELIS_DISCORD_SHARD_COUNT"] = str(args.shard_count)
    try:
        loaded = load_config(args.config, environ)
    except ConfigError as exc:
        print(f"stelis: {exc}", file=sys.stderr)
        return 2
    for warning in loaded.warnings:
        print(f"stelis: warning: {warning}", file=sys.stderr)
    try:  # other personas this process runs on Discord: checked wherever the config is
        companions = load_companions(loaded.config, environ)
    except ConfigError as exc:
        print(f"stelis: {exc}", file=sys.stderr)
        return 2

    command = args.command or "run"
    if command == "health":
        from bot import health

        healthy, why = health.check(health.heartbeat_path(loaded.config.data_dir))
        print(why, file=sys.stdout if healthy else sys.stderr)
        return 0 if healthy else 1
    if command == "discord" and loaded.config.discord.token is None:
        print("stelis: DISCORD_TOKEN is not set, so there is no bot to start. Set it (in .env for docker compose), "
              "or chat in the terminal: python -m bot console (docker compose run --rm stelis python -m bot "
              "console)", file=sys.stderr)
        return 2
    if command == "check-config":
        return _check_config(loaded, companions)
    if command == "playbooks":
        return _playbooks(loaded, args)
    if command == "migrate":
        from bot.migrate import migrate

        logs.configure(loaded.config.log_level, loaded.config.secrets())
        return event_loop.run(migrate(args.source, args.target))
    from memory.store import StoreError

    try:
        return _run(command, loaded, args, companions)
    except StoreError as exc:
        print(f"stelis: {exc}", file=sys.stderr)
        return 2


def _run(command: str, loaded: LoadedConfig, args: argparse.Namespace, companions: list[Config]) -> int:
    config = loaded.config
    if command == "snapshot":
        logs.configure(config.log_level, config.secrets(), log_file=config.data_dir / "stelis.log")
        return event_loop.run(_snapshot(loaded, args))
    if command == "memory-worker":
        from bot.memory_only import run_memory_worker

        logs.configure(config.log_level, config.secrets(), log_file=config.data_dir / "stelis.log", screen=True,
                       json_lines=config.log_format == "json")
        return event_loop.run(run_memory_worker(config, until_idle=args.until_idle))
    if command == "duet":
        logs.configure(config.log_level, config.secrets(), log_file=config.data_dir / "stelis.log")
        return event_loop.run(_duet(loaded, args))
    if command == "discord" or (command == "run" and config.discord.token is not None):
        from bot.discord_bot import run_discord

        logs.configure(config.log_level, config.secrets(), log_file=config.data_dir / "stelis.log", screen=True,
                       json_lines=config.log_format == "json")
        for persona in (config, *companions):
            log.info("%s: data in %s", persona.persona.name, persona.data_dir.resolve())
        return event_loop.run(run_discord(config, companions))
    logs.configure(config.log_level, config.secrets(), log_file=config.data_dir / "stelis.log")
    try:
        return event_loop.run(_console(loaded))
    except KeyboardInterrupt:  # the store closed in _console's finally; everything said is saved
        print(file=sys.stderr)
        return 130


def _playbooks(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    """The library and its check need no database: nothing runs."""
    from bot.playbooks.checker import check_file
    from bot.playbooks.library import BUILTIN, load, playbook_files
    from bot.report import playbook_list_lines, problem_lines
    from bot.tools import REGISTRY

    config = loaded.config
    library, problems = load(playbook_files([BUILTIN, config.playbooks.folder]), tools=REGISTRY,
                             max_depth=config.stelis.max_depth)
    if args.action == "list":
        print("\n".join(playbook_list_lines(library)))
        return 0
    if args.file is not None:
        if not args.file.is_file():
            print(f"stelis: no playbook file {args.file}", file=sys.stderr)
            return 2
        _, problems = check_file(args.file, tools=REGISTRY, library=library, max_depth=config.stelis.max_depth)
    print("\n".join(problem_lines(problems)))
    return 1 if problems else 0


def _check_config(loaded: LoadedConfig, companions: list[Config]) -> int:
    print(f"# source: {loaded.source or '(defaults only)'}")
    for path, companion in zip(loaded.config.companions, companions, strict=True):
        print(f"# companion {companion.persona.name} from {path} (data in {companion.database_name})")
    for key, var in sorted(loaded.env_overrides.items()):
        print(f"# {key} from {var}")
    print(f"# llm provider in use: {loaded.config.llm.resolved_provider()}")
    print(json.dumps(masked_dump(loaded.config), indent=2, ensure_ascii=False))
    return 0


@contextmanager
def _start_up() -> Iterator[None]:
    """What start-up makes (the provider's SDK: thousands of classes) lives for the whole session: the cyclic
    collector does not walk it while it is made (the console's first reply with the Anthropic SDK, `bench
    first_reply`: 1.42-1.51 -> 1.23-1.29 s), nor afterwards (frozen)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        if collecting:
            gc.enable()


async def _console(loaded: LoadedConfig) -> int:
    if hasattr(sys.stdin, "reconfigure"):  # bytes that are not UTF-8 become U+FFFD instead of ending input
        sys.stdin.reconfigure(errors="replace")
    with _start_up():
        from bot.clock import Clock
        from bot.console import Console, completions, console_run_id
        from bot.engine import Engine
        from memory.records import Scope

        # One clock for what is stored and for every schedule: /idle moves it (and it stays moved for this data folder)
        clock = Clock.kept(loaded.config.data_dir / "console_clock")
        engine = await Engine.open(loaded.config, clock=clock, keep_runs=frozenset({console_run_id(Scope.console())}))
    log.info("console started: persona=%s llm=%s db=%s", engine.persona, engine.model_name,
             loaded.config.database_name)
    await engine.start_memory()
    console = Console(engine, sys.stdin, sys.stdout, _user_name(loaded))
    if loaded.config.dashboard.enabled:
        from bot.dashboard.gate import ConsoleGate
        from bot.dashboard.server import Dashboard

        console.dashboard = Dashboard(engine, loaded.config.dashboard, ConsoleGate(), console=console.scope)
        await console.dashboard.start()
    if sys.stdin.isatty():  # a person at a terminal: line editing, history, completion; warnings as a status line
        from bot.line_editor import LineEditor

        console.editor = LineEditor(loaded.config.data_dir / "console_history", completions())
        console.held = logs.hold_warnings()
    try:
        return await console.run_loop()
    finally:
        if console.dashboard is not None:
            await console.dashboard.stop()
        await engine.close()


async def _duet(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    from bot.duet import duet

    if not (1 <= args.turns <= 50 and 1 <= args.exchanges <= 20):
        print("stelis: duet takes --turns from 1 to 50 and --exchanges from 1 to 20", file=sys.stderr)
        return 2
    try:
        # STELIS_* variables are the first persona's (its data_dir above all); keys like ANTHROPIC_API_KEY serve both
        other = load_config(args.other, {k: v for k, v in os.environ.items() if not k.startswith("STELIS_")}).config
    except ConfigError as exc:
        print(f"stelis: {args.other}: {exc}", file=sys.stderr)
        return 2
    try:
        await duet(loaded.config, other, sys.stdout, turns=args.turns, exchanges=args.exchanges,
                   opening=args.opening, live=args.live)
    except Failure as exc:
        print(f"stelis: {exc.notice}", file=sys.stderr)
        return 2
    return 0


async def _snapshot(loaded: LoadedConfig, args: argparse.Namespace) -> int:
    from bot.engine import Engine
    from memory import snapshots

    engine = await Engine.open(loaded.config, exclusive=False)  # the bot may be running: sweep nothing
    try:
        if args.action == "export":
            try:
                snapshot = await engine.snapshots.export(args.thread)
            except KeyError:
                print(f"stelis: no thread {args.thread} in {loaded.config.database_name}", file=sys.stderr)
                return 2
            if str(args.out) == "-":
                print(json.dumps(snapshot, ensure_ascii=False, indent=1))
            else:
                path = args.out or engine.snapshots.directory / f"thread-{args.thread}.json"
                snapshots.write(path, snapshot)
                print(f"wrote {path} ({len(snapshot['messages'])} messages, {snapshot['tokenCount']} tokens)")
            return 0
        for path in args.files:
            try:
                thread = await engine.snapshots.restore(path)
            except snapshots.SnapshotError as exc:
                print(f"stelis: {exc}", file=sys.stderr)
                return 2
            print(f"restored thread {thread.id} ({thread.kind}, {thread.label or thread.scope_key}) from {path}")
        return 0
    finally:
        await engine.close()


def _user_name(loaded: LoadedConfig) -> str:
    """The console's speaker: console.user_name, else the login name (never "you": memory would read it as the
    persona's own words)."""
    if loaded.config.console.user_name:
        return loaded.config.console.user_name
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name (a container without one): a neutral one
        return "guest"


if __name__ == "__main__":
    sys.exit(cli())
