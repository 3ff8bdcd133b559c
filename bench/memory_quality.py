"""Memory quality: does the fact a question needs reach the request, against keeping the last B tokens?

Each seeded conversation (bench/conversations.py) is replayed through the engine with the offline
model on a simulated clock: people's messages are heard, the persona answers every few messages,
and the memory worker runs as the idle gaps between sessions pass. Then, a day later, every question
is previewed (assembled as if asked, nothing stored) at each budget and the request is searched for
each evidence turn's fact-carrying span:

- verbatim: in the history the request carries; summarised: in a memory layer or the rolling
  summary; recalled: in the recall section of the tail; any / all: one / every evidence turn.
- answer: the expected answer appears anywhere in the request (the question itself excluded).
- recency: the same checks on the newest stored messages that fit the same input budget.

Over the replay it also reports the share of reply input tokens the prompt cache would serve (the
fake server's caching rules, applied without HTTP) and the number of summarisation calls.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from bench import Report, locomo
from bench.conversations import Conversation, generate
from bot.config import ConfigError, validate
from bot.engine import Engine
from bot.providers.anthropic_llm import to_params
from bot.providers.offline import OFFLINE_TAG, OfflineLLM
from memory.llm import LLMRequest, LLMResult, TextSink, Usage
from memory.records import Scope
from memory.tokens import count_tokens
from tests.fake_anthropic import FakeAnthropic

BUDGETS = (2_048, 4_096, 8_192, 16_384)
MAX_OUTPUT = 512
CONVERSATIONS = 10
REPLY_EVERY = 4  # the persona answers every fourth message, as in a busy channel set to chat
SCOPE = Scope.channel(1, 1)
REGIONS = ("verbatim", "summarised", "recalled")


class SimClock:
    """The bench's clock: set to each message's time; /idle-style advances work too."""

    def __init__(self, now: float = 0.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def stand_in_reply(request: LLMRequest) -> str:
    """A reply of a persona's usual size that quotes nothing: the offline model's own reply quotes what memory
    holds (a demo), which would copy answers into the history and flatter the scores."""
    earlier = sum(1 for t in request.turns for b in t.blocks if b.kind == "text" and b.text
                  and not b.text.startswith(("[Now: ", "[Recall", "[Memory Summary]"))) - 1
    remembered = f"I remember {earlier} earlier message(s) here" if earlier > 0 else "this is our first exchange"
    memory = " and what my memory holds" if any(b.text.strip() for b in request.system[1:]) else ""
    return (f"{OFFLINE_TAG} {request.persona or 'I'} here: no language model is configured, so I can listen and "
            f"remember but not answer ({remembered}{memory}; /context shows what a model would see).")


class Metered:
    """The offline model, with each reply's usage computed under the prompt-cache rules."""

    name = "offline"

    def __init__(self, clock: SimClock):
        self.inner = OfflineLLM()
        self.cache = FakeAnthropic(clock=clock)
        self.totals: dict[str, int] = defaultdict(int)

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResult:
        result = await self.inner.complete(request, on_text)
        if request.purpose == "summary":
            self.totals["summary_calls"] += 1
            return result
        usage = self.cache.account(to_params(request, "bench"))
        self.totals["input"] += usage["input_tokens"]
        self.totals["creation"] += usage["cache_creation_input_tokens"]
        self.totals["read"] += usage["cache_read_input_tokens"]
        self.totals["replies"] += 1
        text = stand_in_reply(request)
        usage["output_tokens"] = count_tokens(text)
        return LLMResult(text, Usage(**usage), result.model, result.stop_reason, placeholder=True)

    async def aclose(self) -> None:
        return None

    @property
    def cache_share(self) -> float:
        total = self.totals["input"] + self.totals["creation"] + self.totals["read"]
        return self.totals["read"] / total if total else 0.0


@dataclass
class Scores:
    questions: int = 0
    failed: int = 0  # no request could be built
    any: int = 0
    all: int = 0
    answer: int = 0
    regions: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    kinds: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))

    def add(self, found: list[set[str]], answered: bool, kind: str) -> None:
        self.questions += 1
        hit = any(found)
        self.any += hit
        self.all += all(found)
        self.answer += answered
        for region in REGIONS:
            self.regions[region] += any(region in f for f in found)
        self.kinds[kind][0] += hit
        self.kinds[kind][1] += 1

    def shares(self, prefix: str) -> dict[str, float]:
        n = max(1, self.questions)
        out = {f"{prefix}_evidence_any": self.any / n, f"{prefix}_evidence_all": self.all / n,
               f"{prefix}_answer": self.answer / n}
        if prefix == "stelis":
            out.update({f"stelis_{r}": self.regions[r] / n for r in REGIONS})
            out["stelis_no_request"] = self.failed / n
        return {k: round(v, 3) for k, v in out.items()}


def norm(text: str) -> str:
    return " ".join(text.lower().split())


def regions_of(request: LLMRequest) -> dict[str, str]:
    """The request's text by where it sits: history, summaries (memory layers, rolling summary), tail."""
    parts: dict[str, list[str]] = defaultdict(list)
    for block in request.system[1:]:
        parts["summarised"].append(block.text)
    blocks = [b.text for t in request.turns for b in t.blocks]
    tail = [text.startswith(("[Now:", "[Recall")) for text in blocks]
    question = max(i for i, is_tail in enumerate(tail) if not is_tail)  # the history's last block
    for i, text in enumerate(blocks):
        if tail[i]:
            parts["recalled"].append(text)
        elif text.startswith("[Memory Summary]"):
            parts["summarised"].append(text)
        elif i != question:
            parts["verbatim"].append(text)
    return {region: norm("\n".join(texts)) for region, texts in parts.items()}


async def preview(engine: Engine, question: str) -> LLMRequest:
    """The request the question would produce; nothing is stored."""
    return (await engine.conversations.preview(SCOPE, question, author_name="Asker")).request


async def replay(conv: Conversation, budget: int, tmp: Path) -> tuple[Engine, Metered, SimClock, list[int]]:
    """Every turn heard at its time, the persona answering every REPLY_EVERY messages; turn -> seq."""
    clock = SimClock(conv.turns[0].at)
    llm = Metered(clock)
    config = validate({"data_dir": str(tmp), "llm": {"context_tokens": budget, "max_output_tokens": MAX_OUTPUT},
                       "snapshots": {"interval_seconds": 0}})
    engine = await Engine.open(config, llm, clock)  # type: ignore[arg-type]
    seqs = []
    for i, turn in enumerate(conv.turns):
        clock.now = turn.at
        await engine.memory.run_due()
        message = await engine.conversations.hear(SCOPE, turn.text, author_name=turn.speaker, external_id=1_000_000 + i)
        seqs.append(message.seq)
        if i % REPLY_EVERY == REPLY_EVERY - 1:
            try:
                await engine.conversations.reply(message.thread_id)
            except Exception:  # a reply that cannot be built is counted, not fatal here
                llm.totals["reply_failures"] += 1
        # Turns are minutes to days apart: what the bot does in the background meanwhile (recall's index, a cut
        # summarised ahead) is done before the next, as it would be, not whenever this replay's wall clock lets it.
        await engine.conversations.settle()
    clock.now = conv.turns[-1].at + 86_400
    await engine.memory.run_due()
    return engine, llm, clock, seqs


async def recency_texts(engine: Engine, tokens: int) -> str:
    """The newest stored messages that fit `tokens`, as a recency-only bot would send them."""
    thread = await engine.stelis.root(SCOPE)
    kept, used = [], 0
    async for message in engine.store.newest_first(thread.id):
        text = f"[{message.author_name}] {message.content}" if message.role == "user" else message.content
        used += count_tokens(text) + 4
        if used > tokens:
            break
        kept.append(text)
    return norm("\n".join(kept))


async def measure(conv: Conversation, budget: int) -> tuple[Scores, Scores, dict[str, float]]:
    stelis, recency = Scores(), Scores()
    with tempfile.TemporaryDirectory() as tmp:
        try:
            engine, llm, _clock, _seqs = await replay(conv, budget, Path(tmp))
        except ConfigError:  # a budget the configuration refuses: nothing can be built
            for q in conv.questions:
                stelis.failed += 1
                stelis.add([set() for _ in q.keys], False, q.kind)
            return stelis, recency, {}
        baseline = await recency_texts(engine, budget - MAX_OUTPUT)
        for q in conv.questions:
            keys = [norm(k) for k in q.keys]
            recency.add([{"verbatim"} if k in baseline else set() for k in keys], norm(q.answer) in baseline, q.kind)
            try:
                request = await preview(engine, q.text)
            except Exception:  # "no request can be built" is the figure
                stelis.failed += 1
                stelis.add([set() for _ in keys], False, q.kind)
                continue
            regions = regions_of(request)
            found = [{r for r, text in regions.items() if k in text} for k in keys]
            stelis.add(found, norm(q.answer) in "\n".join(regions.values()), q.kind)
        extra = {"cache_read_share": llm.cache_share, "summary_calls": llm.totals["summary_calls"],
                 "replies": llm.totals["replies"], "reply_failures": llm.totals["reply_failures"]}
        await engine.close()
    return stelis, recency, extra


QUICK_CONVERSATIONS = 3  # --quick


async def run(conversations: int = CONVERSATIONS, budgets: tuple[int, ...] = BUDGETS,
              report: Report | None = None, data: Path | None = None, seed: int = 0) -> list[dict]:
    """One line per budget, each to `report` as soon as it is measured; `data`: conversations in the LoCoMo
    format instead of the generated ones (the first `conversations` of them), else those of seeds from `seed`."""
    seeds = range(seed, seed + conversations)
    convs = locomo.load(data)[:conversations] if data else [generate(s) for s in seeds]
    lines = []
    for budget in budgets:
        started = time.perf_counter()
        total_s, total_r = Scores(), Scores()
        extras: dict[str, list[float]] = defaultdict(list)
        for conv in convs:
            s, r, extra = await measure(conv, budget)
            for mine, theirs in ((total_s, s), (total_r, r)):
                mine.questions += theirs.questions
                mine.failed += theirs.failed
                mine.any += theirs.any
                mine.all += theirs.all
                mine.answer += theirs.answer
                for k, v in theirs.regions.items():
                    mine.regions[k] += v
                for k, (hit, n) in theirs.kinds.items():
                    mine.kinds[k][0] += hit
                    mine.kinds[k][1] += n
            for k, v in extra.items():
                extras[k].append(v)
        line = {"bench": "memory_quality", "data": data.name if data else f"generated, seeds {seeds[0]}-{seeds[-1]}",
                "budget": budget,
                "conversations": len(convs),
                "questions": total_s.questions, **total_s.shares("stelis"), **total_r.shares("recency"),
                "cache_read_share": round(statistics.mean(extras["cache_read_share"] or [0]), 3),
                "summary_calls": int(sum(extras["summary_calls"])), "replies": int(sum(extras["replies"])),
                "reply_failures": int(sum(extras["reply_failures"])),
                # per category: evidence (any) kept, Stelis / keeping the newest messages that fit
                "by_category": {k: [round(h / n, 2), round(total_r.kinds[k][0] / n, 2)]
                                for k, (h, n) in sorted(total_s.kinds.items())},
                "seconds": round(time.perf_counter() - started, 1)}
        lines.append(line)
        if report is not None:
            report(line)
    return lines
