"""Running a playbook: node by node over a state, inside a `Run` (the Stelis thread stack).

Any failure or cancellation unwinds the run: the Stelis threads it opened end aborted, with a
partial chronicle when one can be written, so a persona is never left inside a thread. Depth is
refused before any work starts. Every step is logged (node, profile, tier, tokens, cache, time).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from bot.playbooks.checker import nesting
from bot.playbooks.model import (
    LLMNode,
    NodeBase,
    Playbook,
    RouteNode,
    SetNode,
    StelisEndNode,
    StelisStartNode,
    SubplayNode,
    ToolNode,
)
from bot.playbooks.profiles import request_for, with_schema
from bot.playbooks.state import PlaybookError, fill, route
from bot.services.tool_calls import ToolBox
from bot.tools import ToolError, definitions
from bot.tools.registry import argument_problems
from memory import threads
from memory.context import Assembler
from memory.errors import Failure
from memory.llm import LLM, Block, LLMRequest, LLMResult, Tool, ToolCall, Turn, Usage
from memory.records import NewMessage, PlaybookStep, Scope
from memory.settings import StelisSettings
from memory.store import Store
from memory.threads import Run
from memory.turns import tool_call_message, tool_result_message
from memory.vetting import CUT

log = logging.getLogger(__name__)

MAX_STEPS = 200  # nodes one run may visit: a loop in the graph ends with a clear error
SUMMARY_CHARS = 160  # of a step's result, in the run log
Progress = Callable[[str], None]


@dataclass
class RunResult:
    outputs: dict[str, Any]  # the playbook's output_schema keys, and `last`
    log_id: int
    thread_id: int  # where the run ended (the thread it started in, unless it failed)


@dataclass
class _Context:
    playbook: Playbook
    scope: Scope
    run: Run
    log_id: int
    progress: Progress | None
    subagents: int  # subagent levels above this run
    state: dict[str, Any] = field(default_factory=dict)
    start_depth: int = 0  # the depth of the thread the run started in (stelis_config.max_depth counts from it)
    callers: tuple[str, ...] = ()  # the playbooks whose subplay nodes led here, outermost first


class Runner:
    def __init__(self, *, library: Mapping[str, Playbook], toolbox: ToolBox, store: Store, llm: LLM,
                 assembler: Assembler, stelis_at: Callable[[int], Awaitable[StelisSettings]], persona: str,
                 max_subagent_depth: int):
        self.library = library
        self._toolbox = toolbox
        self._store = store
        self._llm = llm
        self._assembler = assembler
        self._stelis_at = stelis_at  # a conversation's (root thread id) Stelis settings in effect now
        self._persona = persona
        self._max_subagents = max_subagent_depth

    async def run(self, name: str, args: dict[str, Any], *, scope: Scope, run: Run,
                  progress: Progress | None = None, subagents: int = 0, callers: tuple[str, ...] = ()) -> RunResult:
        """Run a playbook in `run` (its current thread is where it starts); raises PlaybookError."""
        playbook = self.library.get(name)
        if playbook is None:
            raise PlaybookError(f"there is no playbook {name!r}")
        if name in callers:  # the checker refuses cycles; a library changed since must not recurse either
            raise PlaybookError(f"{name} calls itself ({' -> '.join((*callers, name))}); nothing was run")
        missing = sorted(set(playbook.input_schema.get("required", [])) - set(args))
        if missing:
            raise PlaybookError(f"{name}: missing argument(s) {', '.join(missing)}")
        start = await self._store.thread(run.current)
        deepest = nesting(playbook, self.library)
        most = (await self._stelis_at(run.root_id)).max_depth
        if start.depth + deepest > most:
            raise PlaybookError(f"{name} may open Stelis threads {deepest} deep from depth {start.depth}, past the "
                                f"maximum depth {most} (stelis.max_depth); nothing was run")
        log_id = await self._store.start_playbook_run(name, self._persona, scope.key, run.id, args)
        ctx = _Context(playbook, scope, run, log_id, progress, subagents, {**args, "input": args, "last": None},
                       start.depth, (*callers, name))
        opened = len(run.stack)
        try:
            await self._walk(ctx)
            await self._close_left_open(ctx, opened)
        except BaseException as exc:
            await asyncio.shield(self._unwind(run, opened))
            cancelled = isinstance(exc, asyncio.CancelledError)
            notice = "cancelled" if cancelled else exc.notice if isinstance(exc, Failure) else repr(exc)
            await asyncio.shield(self._store.end_playbook_run(log_id, "cancelled" if cancelled else "failed", None,
                                                              notice))
            if isinstance(exc, Failure) and not isinstance(exc, PlaybookError):
                raise PlaybookError(f"{name}: {exc.notice}") from exc
            raise
        outputs = {key: ctx.state.get(key) for key in playbook.outputs} | {"last": ctx.state.get("last")}
        await self._store.end_playbook_run(log_id, "completed", outputs, None)
        return RunResult(outputs, log_id, run.current)

    async def _walk(self, ctx: _Context) -> None:
        node_id: str | None = ctx.playbook.start_node
        for _ in range(MAX_STEPS):
            if node_id is None:
                return
            node = ctx.playbook.node(node_id)
            if ctx.progress:
                ctx.progress(f"{ctx.playbook.name}: {node.id} ({getattr(node, 'type', '')})")
            started = time.perf_counter()
            try:
                value, step = await self._step(node, ctx)
            except Failure as exc:  # a tool, the model, the store, a nested run: say where it happened
                raise PlaybookError(f"{ctx.playbook.name}, node {node.id}: {exc.notice}") from exc
            key = getattr(node, "output_key", None)
            if key:
                ctx.state[key] = value
            if not isinstance(node, SetNode | RouteNode):
                ctx.state["last"] = value
            await self._store.log_playbook_step(ctx.log_id, replace(
                step, node=node.id, duration_ms=round((time.perf_counter() - started) * 1000, 2),
                summary=_summary(value)))
            node_id = route(node.conditional_next, ctx.state) if node.conditional_next else node.next
        raise PlaybookError(f"{ctx.playbook.name}: more than {MAX_STEPS} steps; is there a loop with no way out?")

    async def _step(self, node: NodeBase, ctx: _Context) -> tuple[Any, PlaybookStep]:
        kind = getattr(node, "type", "")
        step = PlaybookStep(node.id, kind, 0.0)
        if isinstance(node, SetNode):
            values = fill(node.values, ctx.state)
            ctx.state.update(values)
            return values, step
        if isinstance(node, RouteNode):
            return ctx.state.get("last"), step
        if isinstance(node, ToolNode):
            call = ToolCall(f"node-{node.id}", node.tool, fill(node.args, ctx.state))
            return await self._toolbox.run(call, ctx.scope, ctx.run.current, self._toolbox.registry), step
        if isinstance(node, LLMNode):
            return await self._llm_node(node, ctx, step)
        if isinstance(node, StelisStartNode):
            config = node.stelis_config
            below = (await self._store.thread(ctx.run.current)).depth + 1 - ctx.start_depth
            if config.max_depth is not None and below > config.max_depth:
                raise PlaybookError(f"{ctx.playbook.name}, node {node.id}: a thread {below} deep below where the "
                                    f"run started, past its stelis_config.max_depth {config.max_depth}")
            thread = await threads.start(self._store, ctx.run, str(fill(node.label, ctx.state)),
                                         await self._stelis_at(ctx.run.root_id),
                                         window_ratio=config.window_ratio, chronicle_prompt=config.chronicle_prompt)
            return {"thread": thread.id, "depth": thread.depth}, step
        if isinstance(node, StelisEndNode):
            ended = await threads.end(self._store, self._llm, ctx.run, await self._stelis_at(ctx.run.root_id),
                                      generate_chronicle=node.generate_chronicle)
            return {"thread": ended.id, "status": ended.status, "chronicle": ended.chronicle_summary}, step
        if isinstance(node, SubplayNode):
            return await self._subplay(node, ctx), step
        raise PlaybookError(f"node type {kind!r} cannot run")

    async def _llm_node(self, node: LLMNode, ctx: _Context, step: PlaybookStep) -> tuple[Any, PlaybookStep]:
        instruction = with_schema(str(fill(node.action, ctx.state)), node.response_schema)
        # The conversation profile offers the conversation's tools, always the same list (the cached prefix);
        # other profiles offer the node's own.
        tools = None if node.context_profile == "conversation" else definitions(self._toolbox.registry, node.tools)
        request = await self._request(node, ctx, instruction, tools)
        usage = Usage()
        for round_ in range(node.max_tool_rounds + 1):
            if round_ == node.max_tool_rounds:
                request = replace(request, tool_choice="none" if request.tools else None)
            result = await self._llm.complete(request)
            usage = _added(usage, result.usage)
            if not result.tool_calls:
                break
            request = await self._tool_round(node, ctx, instruction, tools, request, result)
        value: Any = result.text
        if node.response_schema is not None:
            value, answered = await self._answer_as_asked(node, request, result)
            usage = usage if answered is result else _added(usage, answered.usage)
            result = answered
        step = replace(step, profile=node.context_profile, tier=request.tier, input_tokens=usage.input_tokens,
                       output_tokens=usage.output_tokens, cache_read=usage.cache_read_input_tokens,
                       cache_write=usage.cache_creation_input_tokens)
        if node.speak:
            await self._speak(ctx, node, result.text)
        elif node.memorize:
            await self._keep(ctx, node, result.text, placeholder=result.placeholder)
        return value, step

    async def _answer_as_asked(self, node: LLMNode, request: LLMRequest,
                               result: LLMResult) -> tuple[dict[str, Any], LLMResult]:
        """The JSON object the node's schema asks for; an answer that is not one is sent back once with what
        was wrong, and a second miss ends the node with a PlaybookError that says so."""
        assert node.response_schema is not None
        try:
            return _structured(result.text, node.response_schema), result
        except PlaybookError as first:
            log.info("%s: %s; asked again", node.id, first)
            cut = " It was cut off at the length limit: keep each text short." if result.stop_reason in CUT else ""
            again = replace(request, tools=(), tool_choice=None, turns=(
                *request.turns, Turn.text("assistant", result.text or "(nothing)"),
                Turn.text("user", f"That answer cannot be used: {first}.{cut} Answer again with only the JSON "
                                  "object, matching the schema given above.")))
            result = await self._llm.complete(again)
            try:
                return _structured(result.text, node.response_schema), result
            except PlaybookError as second:
                raise PlaybookError(f"twice no usable answer ({second})") from None

    async def _speak(self, ctx: _Context, node: LLMNode, text: str) -> None:
        """Said in the conversation through its front end (which remembers it), or kept where the run is."""
        try:
            await self._toolbox.services.post(ctx.scope, text)
        except ToolError:  # no front end (a test, a script): the words are still the persona's
            await self._keep(ctx, node, text)

    async def _keep(self, ctx: _Context, node: LLMNode, text: str, *, placeholder: bool = False) -> None:
        metadata: dict[str, object] = {"playbook": ctx.playbook.name, "node": node.id}
        if placeholder:
            metadata["placeholder"] = True
        await self._store.append(ctx.run.current, NewMessage("assistant", text, author_name=self._persona,
                                                             metadata=metadata))

    async def _request(self, node: LLMNode, ctx: _Context, instruction: str,
                       tools: tuple[Tool, ...] | None) -> LLMRequest:
        return await request_for(node.context_profile, instruction, thread_id=ctx.run.current, state=ctx.state,
                                 assembler=self._assembler, store=self._store, tools=tools,
                                 response_schema=node.response_schema, max_tokens=self._assembler.budget.output)

    async def _tool_round(self, node: LLMNode, ctx: _Context, instruction: str, tools: tuple[Tool, ...] | None,
                          request: LLMRequest, result: LLMResult) -> LLMRequest:
        """Run the calls; the conversation keeps them as paired messages, other profiles in the request."""
        offered = [t.name for t in request.tools]
        outputs = [(call, await self._toolbox.answer(call, ctx.scope, ctx.run.current, offered))
                   for call in result.tool_calls]
        if node.context_profile == "conversation":
            await self._store.append(ctx.run.current, tool_call_message(result, self._persona))
            for call, output in outputs:
                await self._store.append(ctx.run.current, tool_result_message(
                    call, output, lookup=self._toolbox.looks_up(call.name)))
            return await self._request(node, ctx, instruction, tools)
        said = Turn("assistant", (*((Block(result.text),) if result.text.strip() else ()),
                                  *(Block(kind="tool_use", tool_id=c.id, tool_name=c.name, tool_input=c.input)
                                    for c in result.tool_calls)))
        answered = Turn("user", tuple(Block(out or "(empty result)", kind="tool_result", tool_id=c.id)
                                      for c, out in outputs))
        return replace(request, turns=(*request.turns, said, answered))

    async def _subplay(self, node: SubplayNode, ctx: _Context) -> dict[str, Any]:
        args = fill(node.args, ctx.state)
        if node.execution == "inline":
            done = await self.run(node.playbook, args, scope=ctx.scope, run=ctx.run, progress=ctx.progress,
                                  subagents=ctx.subagents, callers=ctx.callers)
            return done.outputs
        if ctx.subagents >= self._max_subagents:
            raise PlaybookError(f"subagents may nest {self._max_subagents} deep (playbooks.subagent_depth)")
        sub_run = Run(root_id=ctx.run.root_id, stack=list(ctx.run.stack))
        await threads.start(self._store, sub_run, f"subagent: {node.playbook}", await self._stelis_at(sub_run.root_id),
                            kind="subagent")
        try:
            done = await self.run(node.playbook, args, scope=ctx.scope, run=sub_run, progress=ctx.progress,
                                  subagents=ctx.subagents + 1, callers=ctx.callers)
        except BaseException:
            await asyncio.shield(self._unwind(sub_run, len(ctx.run.stack)))
            raise
        await threads.end(self._store, self._llm, sub_run, await self._stelis_at(sub_run.root_id),
                          generate_chronicle=False)  # kept to read
        return done.outputs

    async def _close_left_open(self, ctx: _Context, keep: int) -> None:
        """A run that ended with threads it opened still open (the checker refuses such playbooks; a route it
        could not foresee may still) ends them, innermost first, each with its chronicle."""
        while len(ctx.run.stack) > keep:
            log.warning("%s ended with Stelis thread %d still open: it is ended now", ctx.playbook.name,
                        ctx.run.current)
            await threads.end(self._store, self._llm, ctx.run, await self._stelis_at(ctx.run.root_id))

    async def _unwind(self, run: Run, keep: int) -> None:
        """Abort the threads a run opened beyond the first `keep`, innermost first, each with what chronicle
        can be made; a failure here is logged, never raised over the error that caused the unwinding."""
        while len(run.stack) > keep:
            try:
                await threads.abort(self._store, self._llm, run, await self._stelis_at(run.root_id))
            except Exception:
                log.exception("could not abort Stelis thread %s while unwinding a playbook", run.stack[-1:])
                run.stack.pop()


def _added(a: Usage, b: Usage) -> Usage:
    return Usage(a.input_tokens + b.input_tokens, a.output_tokens + b.output_tokens,
                 a.cache_read_input_tokens + b.cache_read_input_tokens,
                 a.cache_creation_input_tokens + b.cache_creation_input_tokens)


def _structured(text: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The JSON object an answer holds (a code fence around it is fine), valid for the schema's keys."""
    found = re.search(r"\{.*\}", text, re.DOTALL)
    try:  # a line break in a string is what a local server's JSON grammar lets through (llama.cpp's `char`)
        value = json.loads(found.group(0), strict=False) if found else None
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise PlaybookError(f"the model did not answer with a JSON object: {text[:120]!r}")
    problems = argument_problems(schema, value, unknown_ok=True)
    if problems:
        raise PlaybookError(f"the model's JSON answer is not as asked: {'; '.join(problems)}")
    return value


def _summary(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS - 1] + "…"
