"""Who may use the console, and how they prove it: operators, roles, tokens, one-time login
links, cookie sessions and their CSRF tokens.

**Nothing without a credential.** Every API call carries either ``Authorization: Bearer
<token>`` (scripts, the tests, another service) or the session cookie a person gets by opening a
one-time login link (``deermem console`` prints one) or by pasting their token into the login
page. The cookie is ``HttpOnly`` and ``SameSite=Strict``, and a request that changes something
with it must also send the session's CSRF token in ``X-CSRF-Token`` (the page reads it from
``GET api/session``): a page on another site can make the browser send the cookie, it cannot
read the token. Bearer requests need no CSRF token, since a browser never adds that header by
itself.

**Tokens are kept as SHA-256 digests.** An operators file holds ``token_sha256`` (``deermem
console --add-operator`` writes it and shows the token once); a token is looked up by its digest,
so the file never holds a usable secret. Login links are single-use and short-lived (15 minutes);
sessions end after 8 hours without use. Both live in the process: restarting the console logs
everyone out, which is what a person who restarts it after a leak wants.

**Roles and scope.** ``read`` sees; ``edit`` also adds, edits, deletes facts, imports and
forgets. An operator may be scoped to a set of users (exact ids, or a prefix ending in ``*``):
every other user is invisible to them and refused (403) by name.

The clock and the token source are passed in, so the rules are tested without waiting.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

__all__ = [
    "LINK_TTL_SECONDS",
    "ROLES",
    "SESSION_TTL_SECONDS",
    "ConsoleAuth",
    "Operator",
    "Role",
    "Session",
    "token_digest",
]

Role = Literal["read", "edit"]
ROLES: Final[tuple[Role, ...]] = ("read", "edit")
LINK_TTL_SECONDS: Final = 15 * 60.0
SESSION_TTL_SECONDS: Final = 8 * 3600.0
MAX_SESSIONS: Final = 10_000
"""Sessions kept at once; the least recently used go first (a flood of logins cannot grow the
process without bound)."""


def token_digest(token: str) -> str:
    """The SHA-256 hex digest a token is stored and looked up by."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class Operator:
    """A person or service using the console: a name (written into the audit log), a role, and
    optionally the users they may see (exact ids, or prefixes ending in ``*``; None: everyone)."""

    name: str
    role: Role = "read"
    users: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"operator name must be a non-empty string, got {self.name!r}")
        if self.role not in ROLES:
            raise ValueError(
                f"operator {self.name!r}: role must be one of {', '.join(ROLES)}, got {self.role!r}"
            )

    @property
    def can_edit(self) -> bool:
        return self.role == "edit"

    def can_see(self, user_id: str) -> bool:
        """True when this operator may see (and, with ``edit``, change) ``user_id``."""
        if self.users is None:
            return True
        for pattern in self.users:
            if pattern.endswith("*"):
                if user_id.startswith(pattern[:-1]):
                    return True
            elif user_id == pattern:
                return True
        return False

    def describe(self) -> dict[str, object]:
        return {
            "operator": self.name,
            "role": self.role,
            "users": None if self.users is None else sorted(self.users),
        }


@dataclass(slots=True)
class Session:
    """A logged-in browser: its operator, its CSRF token and when it ends unless used."""

    id: str
    operator: Operator
    csrf: str
    expires_at: float


@dataclass(slots=True)
class _Link:
    operator: Operator
    expires_at: float


@dataclass
class ConsoleAuth:
    """Tokens, links and sessions (see the module docstring). Thread-safe."""

    tokens: dict[str, Operator] = field(default_factory=dict)
    """Operators by the digest of their token."""
    clock: Callable[[], float] = time.time
    new_secret: Callable[[], str] = lambda: secrets.token_urlsafe(32)
    session_ttl: float = SESSION_TTL_SECONDS
    link_ttl: float = LINK_TTL_SECONDS
    _links: dict[str, _Link] = field(default_factory=dict, init=False, repr=False)
    _sessions: dict[str, Session] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @classmethod
    def of(cls, operators: Iterable[tuple[str, Operator]], **kwargs: object) -> ConsoleAuth:
        """From ``(token digest, operator)`` pairs (an operators file, read by
        :func:`~deermem_middleware.console.operators.load_operators`)."""
        auth = cls(**kwargs)  # type: ignore[arg-type]
        for digest, operator in operators:
            auth.tokens[digest] = operator
        return auth

    def add_token(self, operator: Operator, token: str | None = None) -> str:
        """Give ``operator`` a bearer token (a new random one by default); returns it."""
        token = token or self.new_secret()
        self.tokens[token_digest(token)] = operator
        return token

    @property
    def operators(self) -> Sequence[Operator]:
        return tuple(self.tokens.values())

    # -- credentials ------------------------------------------------------------------------

    def bearer(self, token: str) -> Operator | None:
        """The operator a bearer token belongs to; None for an unknown token."""
        if not token:
            return None
        return self.tokens.get(token_digest(token))

    def issue_link(self, operator: Operator) -> str:
        """A one-time login secret for ``operator`` (put it in a ``login?token=`` URL)."""
        secret = self.new_secret()
        with self._lock:
            self._drop_expired()
            self._links[token_digest(secret)] = _Link(operator, self.clock() + self.link_ttl)
        return secret

    def redeem_link(self, secret: str) -> Session | None:
        """A new session for a login link, which is spent; None when it is unknown, spent or
        expired."""
        with self._lock:
            link = self._links.pop(token_digest(secret), None) if secret else None
        if link is None or link.expires_at < self.clock():
            return None
        return self.start_session(link.operator)

    def login(self, token: str) -> Session | None:
        """A new session for an operator's bearer token (the login page's form)."""
        operator = self.bearer(token)
        return None if operator is None else self.start_session(operator)

    def start_session(self, operator: Operator) -> Session:
        session = Session(
            self.new_secret(), operator, self.new_secret(), self.clock() + self.session_ttl
        )
        with self._lock:
            self._drop_expired()
            while len(self._sessions) >= MAX_SESSIONS:
                self._sessions.pop(next(iter(self._sessions)))
            self._sessions[session.id] = session
        return session

    def session(self, session_id: str) -> Session | None:
        """The live session with this id (its lifetime starts again); None otherwise."""
        if not session_id:
            return None
        now = self.clock()
        with self._lock:
            session = self._sessions.pop(session_id, None)
            if session is None or session.expires_at < now:
                return None
            session.expires_at = now + self.session_ttl
            self._sessions[session_id] = session  # most recently used last
        return session

    def end_session(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)

    @staticmethod
    def csrf_ok(session: Session, sent: str | None) -> bool:
        return bool(sent) and hmac.compare_digest(session.csrf, sent or "")

    def _drop_expired(self) -> None:
        now = self.clock()
        for table in (self._links, self._sessions):
            for key in [k for k, v in table.items() if v.expires_at < now]:
                del table[key]
