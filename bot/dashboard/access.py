"""Who may open the dashboard: one-time sign-in links and the sessions they start, both signed and short-lived."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from itsdangerous import BadSignature, SignatureExpired, TimestampSigner, URLSafeTimedSerializer

from memory.errors import Failure

CONSOLE = 0  # the "server" of the console's own conversation


class Refused(Failure):
    """A link or session that does not open the dashboard (forged, expired, used, or for another server)."""


@dataclass(frozen=True)
class Grant:
    """A signed-in admin of one server, with the token every change they post must carry."""

    guild_id: int
    user_id: int
    csrf: str


def _signer(clock: Callable[[], float]) -> type[TimestampSigner]:
    class ClockedSigner(TimestampSigner):  # the engine's clock, so expiry is testable without waiting
        def get_timestamp(self) -> int:
            return int(clock())

    return ClockedSigner


class Access:
    """Issues sign-in links bound to a server and a user, redeems each once, and reads the sessions they start."""

    def __init__(self, secret: str, sign_in_seconds: float, session_seconds: float,
                 clock: Callable[[], float] = time.time):
        signer = _signer(clock)
        self._links = URLSafeTimedSerializer(secret, salt="stelis-dashboard-sign-in", signer=signer)
        self._sessions = URLSafeTimedSerializer(secret, salt="stelis-dashboard-session", signer=signer)
        self.sign_in_seconds, self.session_seconds = sign_in_seconds, session_seconds
        self._clock = clock
        self._used: dict[str, float] = {}  # nonce -> when its link expires (kept that long, then forgotten)

    def link_token(self, guild_id: int, user_id: int) -> str:
        return self._links.dumps({"g": guild_id, "u": user_id, "n": secrets.token_urlsafe(16)})

    def redeem(self, token: str) -> Grant:
        """The session a sign-in link starts; a link works once, and only while it is fresh."""
        data = self._load(self._links, token, self.sign_in_seconds, "sign-in link")
        now = self._clock()
        self._used = {n: until for n, until in self._used.items() if until > now}
        if data["n"] in self._used:
            raise Refused("this sign-in link was already used: ask for a new one with /dashboard")
        self._used[data["n"]] = now + self.sign_in_seconds
        return Grant(int(data["g"]), int(data["u"]), secrets.token_urlsafe(24))

    def cookie(self, grant: Grant) -> str:
        return self._sessions.dumps({"g": grant.guild_id, "u": grant.user_id, "c": grant.csrf})

    def session(self, cookie: str) -> Grant:
        data = self._load(self._sessions, cookie, self.session_seconds, "session")
        return Grant(int(data["g"]), int(data["u"]), str(data["c"]))

    @staticmethod
    def _load(serializer: URLSafeTimedSerializer, token: str, max_age: float, what: str) -> dict[str, Any]:
        try:
            data = serializer.loads(token, max_age=int(max_age))
        except SignatureExpired:
            raise Refused(f"this {what} has expired: ask for a new one with /dashboard") from None
        except BadSignature:
            raise Refused(f"this {what} is not valid") from None
        if not isinstance(data, dict):
            raise Refused(f"this {what} is not valid")
        return data
