"""The console's first reply, as a person starting it meets it: a new process, `python -m bot console`, one line
typed, the time until the persona's answer is printed. With the offline model, with the Anthropic provider talking to
the fake Messages API on this machine, and with an OpenAI-compatible server's (each SDK imported, a request made, the
answer streamed).

The target (issue 32): 1.5 s at most with any provider on this 2-core machine. The ratio is to the same process
doing nothing but start Python and import what every run imports (`python -c "import bot.config"`).
"""

from __future__ import annotations

import asyncio
import compileall
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.fake_anthropic import FakeAnthropic
from tests.fake_openai import FakeOpenAI

SAMPLES = 3
REPO = Path(__file__).resolve().parent.parent


async def _timed(argv: list[str], env: dict[str, str], stdin: bytes, until: bytes) -> float:
    """Seconds from the process's start until a line starting with `until` is printed whole."""
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(*argv, cwd=REPO, env=env, stdin=asyncio.subprocess.PIPE,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(stdin)
    await process.stdin.drain()
    seen = b""
    while until not in seen or b"\n" not in seen[seen.index(until):]:
        chunk = await asyncio.wait_for(process.stdout.read(4096), 60)
        if not chunk:
            raise RuntimeError(f"{' '.join(argv)} ended without printing {until!r}: {seen[-400:]!r}")
        seen += chunk
    took = time.perf_counter() - started
    process.stdin.close()
    await process.wait()
    return took


def _write_bytecode() -> None:
    """Our modules' bytecode, as `make run` writes it: where PYTHONDONTWRITEBYTECODE is set (this machine, container
    images) a stale one is compiled again at every start, 0.1-0.2 s that a user of `make run` never waits for."""
    for package in ("bot", "memory", "cogs"):
        compileall.compile_dir(REPO / package, quiet=1)


def _environment(data: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STELIS_", "ANTHROPIC_", "OPENAI_", "DISCORD_"))}
    return {**env, "STELIS_DATA_DIR": str(data), "STELIS_CONSOLE_USER_NAME": "mahe", **extra}


async def _provider(name: str, extra: dict[str, str]) -> float:
    times = []
    for _ in range(SAMPLES):
        with tempfile.TemporaryDirectory() as tmp:
            times.append(await _timed([sys.executable, "-m", "bot", "console"], _environment(Path(tmp), **extra),
                                      b"hello, are you there?\n", b"Stelis:"))
    return statistics.median(times)


async def run() -> list[dict]:
    _write_bytecode()
    bare = statistics.median([await _timed([sys.executable, "-c", "import bot.config; print('ready')"],
                                           _environment(Path(tempfile.gettempdir())), b"", b"ready")
                              for _ in range(SAMPLES)])
    async with contextlib.AsyncExitStack() as servers:  # a server that started is stopped, whatever fails next
        fake = await FakeAnthropic().start()
        servers.push_async_callback(fake.stop)
        compatible = await FakeOpenAI().start()
        servers.push_async_callback(compatible.stop)
        lines = []
        for name, extra in (("offline", {"STELIS_LLM_PROVIDER": "offline"}),
                            ("anthropic", {"ANTHROPIC_API_KEY": "sk-bench", "ANTHROPIC_BASE_URL": fake.base_url}),
                            ("openai", {"STELIS_LLM_PROVIDER": "openai", "OPENAI_API_KEY": "sk-bench",
                                        "OPENAI_BASE_URL": compatible.base_url})):
            took = await _provider(name, extra)
            lines.append({"bench": "first_reply", "provider": name, "first_reply_s": round(took, 2),
                          "python_and_config_s": round(bare, 2), "ratio_to_bare": round(took / bare, 1),
                          "target_s": 1.5})
    return lines
