"""The admin's web dashboard: pages written on the server (aiohttp, Jinja2), a front end like the cogs and the console.

Every page and change re-checks the signed-in admin against the front end (`Gate`): Manage Server in that server,
and read access to the channel shown. Changes are POSTs carrying the session's CSRF token; they go through the
same services as the commands.
"""

from __future__ import annotations

import difflib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import jinja2
from aiohttp import web
from markupsafe import Markup

from bot.config import DashboardConfig
from bot.dashboard.access import CONSOLE, Access, Grant, Refused
from bot.dashboard.charts import token_bars
from bot.dashboard.gate import Gate
from bot.report import outcome_lines
from memory.errors import Failure
from memory.layers import covered_days
from memory.records import MemoryRecord, Scope, Thread

if TYPE_CHECKING:
    from bot.engine import Engine

log = logging.getLogger(__name__)

PAGES = Path(__file__).resolve().parent.parent.parent / "templates" / "dashboard"
COOKIE = "stelis_session"
PAGE_SIZE = 50  # memory versions per page: a channel with a thousand opens as fast as one with fifty
HEADERS = {  # nothing from elsewhere, no frames, no script; the sign-in token never leaves in a Referer
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
GRANT = web.RequestKey("grant", Grant)


@dataclass(frozen=True)
class Entry:
    """A conversation the signed-in admin may open: its channel id in the URL, its scope, its root thread."""

    channel_id: int
    name: str
    scope: Scope
    root: Thread


class Dashboard:
    def __init__(self, engine: Engine, config: DashboardConfig, gate: Gate, *, console: Scope | None = None,
                 clock: Callable[[], float] = time.time):
        secret = config.secret.get_secret_value() if config.secret else secrets.token_urlsafe(32)
        self.access = Access(secret, config.sign_in_minutes * 60, config.session_hours * 3600, clock)
        self.engine, self.config, self.gate = engine, config, gate
        self._console = console  # the console's own conversation (the console's dashboard shows only it)
        self._pages = jinja2.Environment(loader=jinja2.FileSystemLoader(PAGES), autoescape=True,
                                         undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self._pages.filters.update(when=_when, days=covered_days)
        self._runner: web.AppRunner | None = None
        self.url = (config.public_url or "").rstrip("/")

    # running

    async def start(self) -> str:
        """Listen; the address people open (the public URL when set)."""
        self._runner = web.AppRunner(self.app(), handle_signals=False, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.config.host, self.config.port).start()
        bound = self._runner.addresses[0][1]
        self.url = self.url or f"http://{self.config.host}:{bound}"
        log.info("dashboard at %s (sign in with /dashboard)", self.url)
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def sign_in_link(self, guild_id: int, user_id: int) -> str:
        """A one-time link that signs this user in to this server's dashboard."""
        return f"{self.url}/signin?token={self.access.link_token(guild_id, user_id)}"

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._headers, self._guard])
        app.router.add_get("/", self._home)
        app.router.add_get("/signin", self._sign_in)
        app.router.add_post("/signout", self._sign_out)
        app.router.add_get("/g/{guild}", self._overview)
        app.router.add_get("/g/{guild}/c/{channel}", self._memory)
        app.router.add_post("/g/{guild}/c/{channel}", self._change_memory)
        app.router.add_get("/g/{guild}/c/{channel}/context", self._context)
        app.router.add_get("/g/{guild}/c/{channel}/threads", self._threads)
        app.router.add_get("/g/{guild}/people", self._people)
        app.router.add_post("/g/{guild}/people", self._forget)
        return app

    # who may see what

    @web.middleware
    async def _headers(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await handler(request)
        response.headers.update(HEADERS)
        return response

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """A page of a server opens for a session of that server whose user still manages it; a change also
        needs the session's CSRF token."""
        if "guild" not in request.match_info:
            return await handler(request)
        try:
            grant = self.access.session(request.cookies.get(COOKIE, ""))
        except Refused as exc:
            return self._refused(401, f"{exc.notice}. Sign in with the link /dashboard gives you.")
        if request.match_info["guild"] != str(grant.guild_id):
            return self._refused(403, "This session is for another server.")
        if not await self.gate.manages(grant.guild_id, grant.user_id):
            return self._refused(403, "This needs the Manage Server permission in this server.")
        if request.method == "POST":
            form = await request.post()
            if not secrets.compare_digest(str(form.get("csrf", "")), grant.csrf):
                return self._refused(403, "This change did not come from a dashboard page: nothing was changed.")
        request[GRANT] = grant
        return await handler(request)

    async def _conversation(self, request: web.Request) -> Entry:
        """The conversation in the URL, if it is one of this server's that the admin may read (else 404)."""
        grant = request[GRANT]
        try:
            channel_id = int(request.match_info["channel"])
        except ValueError:
            raise web.HTTPNotFound(text="no such conversation") from None
        for conversation in await self._conversations(grant):
            if conversation.channel_id == channel_id:
                return conversation
        raise web.HTTPNotFound(text="no such conversation here")

    async def _conversations(self, grant: Grant) -> list[Entry]:
        """This server's conversations the admin may read: channels and private threads, never a DM."""
        if grant.guild_id == CONSOLE:
            if self._console is None:
                return []
            root = await self.engine.stelis.root(self._console)
            return [Entry(0, "console", self._console, root)]
        roots = [r for r in await self.engine.conversations.channel_roots()
                 if r.guild_id == grant.guild_id and r.channel_id is not None and r.discord_thread_id is None]
        readable = await self.gate.readable(grant.guild_id, grant.user_id, [r.channel_id or 0 for r in roots])
        return [Entry(r.channel_id or 0, self.gate.channel_name(grant.guild_id, r.channel_id or 0),
                      Scope(r.scope_key, r.guild_id, r.channel_id, r.discord_thread_id), r)
                for r in roots if r.channel_id in readable]

    # pages

    async def _home(self, request: web.Request) -> web.StreamResponse:
        try:
            grant = self.access.session(request.cookies.get(COOKIE, ""))
        except Refused:
            return self._page("signed_out.html.j2", None, status=401)
        raise web.HTTPSeeOther(f"/g/{grant.guild_id}")

    async def _sign_in(self, request: web.Request) -> web.StreamResponse:
        try:
            grant = self.access.redeem(request.query.get("token", ""))
        except Refused as exc:
            return self._refused(403, exc.notice)
        if not await self.gate.manages(grant.guild_id, grant.user_id):
            return self._refused(403, "This needs the Manage Server permission in that server.")
        response = web.HTTPSeeOther(f"/g/{grant.guild_id}")  # the token leaves the address bar at once
        response.set_cookie(COOKIE, self.access.cookie(grant), max_age=int(self.access.session_seconds),
                            httponly=True, samesite="Strict", secure=self.url.startswith("https:"), path="/")
        raise response

    async def _sign_out(self, request: web.Request) -> web.StreamResponse:
        response = web.HTTPSeeOther("/")
        response.del_cookie(COOKIE, path="/")
        raise response

    async def _overview(self, request: web.Request) -> web.StreamResponse:
        grant = request[GRANT]
        rows = []
        for conversation in await self._conversations(grant):
            view = await self.engine.admin.peek(conversation.scope)
            rows.append((conversation, view.channel if view else None))
        place = self._console or Scope.channel(grant.guild_id, 0)
        status = await self.engine.pulses.status(place)
        decisions = await self.engine.autonomy.log(place, 8)
        spending = self.engine.spending
        spent = await spending.of(None if grant.guild_id == CONSOLE else grant.guild_id, days=30)
        days = spent.days()
        return self._page("overview.html.j2", grant, rows=rows, pulse=status, decisions=decisions,
                          home=self._home_name(grant, status.home), days=days[::-1],
                          today=spent.by_model(spending.today()),
                          chart=Markup(token_bars({day: tokens for day, _, tokens, _, _ in days})))

    async def _memory(self, request: web.Request) -> web.StreamResponse:
        grant = request[GRANT]
        conversation = await self._conversation(request)
        page = max(0, _int(request.query.get("page"), 0))
        view = await self.engine.admin.peek(conversation.scope)
        shown = (page + 1) * PAGE_SIZE
        short_term = (await self.engine.admin.history(conversation.scope, "short_term", shown + 1))[::-1]
        long_term = (await self.engine.admin.history(conversation.scope, "long_term", 20))[::-1]
        return self._page("memory.html.j2", grant, conversation=conversation, view=view, page=page,
                          versions=short_term[page * PAGE_SIZE:shown], older=len(short_term) > shown,
                          merges=_merges(long_term), notice=request.query.get("notice", ""))

    async def _change_memory(self, request: web.Request) -> web.StreamResponse:
        conversation = await self._conversation(request)
        form = await request.post()
        action, scope, admin = str(form.get("action", "")), conversation.scope, self.engine.admin
        try:
            if action in ("pin", "unpin"):
                changed = await admin.pin(scope, str(form.get("fact", "")), action == "pin")
                notice = f"{'Pinned' if action == 'pin' else 'Unpinned'}." if changed else "Nothing changed."
            elif action == "edit":
                record = await admin.edit(scope, str(form.get("content", "")),
                                          from_version=_int(form.get("version"), None))
                notice = f"Saved as version {record.version}; it replaces what prompts showed of the ones it covers."
            elif action == "rollback":
                record = await admin.rollback(scope, _int(form.get("version"), 0))
                notice = f"Rolled back: version {record.version} restores it; later ones are hidden (kept)."
            elif action == "regenerate":
                notice = "Regenerated. " + " ".join(outcome_lines(await admin.regenerate(scope)))
            elif action in ("pause", "resume"):
                await admin.pause(scope, action == "pause")
                notice = "Memory updates paused." if action == "pause" else "Memory updates resumed."
            else:
                notice = f"Unknown action {action!r}: nothing changed."
        except Failure as exc:
            notice = f"Not done: {exc.notice}"
        raise web.HTTPSeeOther(f"{request.path}?notice={quote(notice)}")

    async def _context(self, request: web.Request) -> web.StreamResponse:
        grant = request[GRANT]
        conversation = await self._conversation(request)
        test = request.query.get("test", "").strip()[:2000]
        if test:  # what recall would bring for this message; nothing is stored
            assembly = await self.engine.conversations.preview(conversation.scope, test, author_name="dashboard")
        else:
            assembly = await self.engine.conversations.context(conversation.root.id, calls=False)
        total = self.engine.config.llm.context_tokens
        used = {part: tokens for part, tokens in assembly.parts.items() if part != "free"}
        return self._page("context.html.j2", grant, conversation=conversation, assembly=assembly, test=test,
                          chart=Markup(token_bars(used)), total=total, used=sum(used.values()))

    async def _threads(self, request: web.Request) -> web.StreamResponse:
        grant = request[GRANT]
        conversation = await self._conversation(request)
        branches = [await self.engine.branches.detail(conversation.scope, b.id)
                    for b in await self.engine.branches.of(conversation.scope)]
        return self._page("threads.html.j2", grant, conversation=conversation,
                          tree=await self.engine.stelis.tree(conversation.root.id),
                          branches=[b for b in branches if b is not None],
                          tasks=await self.engine.tasks.of(conversation.scope),
                          decisions=await self.engine.autonomy.log(conversation.scope, 20))

    async def _people(self, request: web.Request) -> web.StreamResponse:
        grant = request[GRANT]
        out = await self.gate.members(grant.guild_id, sorted(self.engine.forgetting.opted_out()))
        return self._page("people.html.j2", grant, opted_out=out, notice=request.query.get("notice", ""))

    async def _forget(self, request: web.Request) -> web.StreamResponse:
        grant = request[GRANT]
        form = await request.post()
        user_id = _int(form.get("user_id"), 0)
        if user_id <= 0:
            notice = "Give the member's user id (Discord: right-click them, Copy User ID)."
        elif grant.guild_id == CONSOLE:
            notice = "The console has no members to forget."
        else:
            done = await self.engine.forgetting.forget_person(user_id, guild_id=grant.guild_id)
            notice = (f"Forgotten in this server: {done.messages} message(s) erased, {done.versions} memory "
                      f"version(s) rewritten.") if not done.unfinished else (
                f"Forgotten in this server: {done.messages} message(s) erased. What was remembered from them could "
                f"not be rewritten yet ({done.unfinished}); it is rewritten on its own as soon as it can be.")
        raise web.HTTPSeeOther(f"{request.path}?notice={quote(notice)}")

    # rendering

    def _page(self, name: str, grant: Grant | None, status: int = 200, **context: Any) -> web.Response:
        server = self.gate.server_name(grant.guild_id) if grant else ""
        text = self._pages.get_template(name).render(grant=grant, server=server, persona=self.engine.persona,
                                                     **context)
        return web.Response(text=text, status=status, content_type="text/html")

    def _refused(self, status: int, why: str) -> web.Response:
        return self._page("refused.html.j2", None, status=status, why=why)

    def _home_name(self, grant: Grant, home: Scope | None) -> str:
        if home is None or home.channel_id is None:
            return "not set"
        return self.gate.channel_name(grant.guild_id, home.channel_id)


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _int(value: object, default: Any) -> Any:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return default


def _merges(versions: list[MemoryRecord]) -> list[tuple[MemoryRecord, list[str], list[str]]]:
    """Each long-term version, newest first, with the lines its merge added and dropped."""
    out = []
    for i, record in enumerate(versions):
        before = versions[i + 1].content.splitlines() if i + 1 < len(versions) else []
        diff = list(difflib.ndiff(before, record.content.splitlines()))
        out.append((record, [d[2:] for d in diff if d.startswith("+ ")], [d[2:] for d in diff if d.startswith("- ")]))
    return out
