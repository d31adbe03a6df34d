"""The operators file: who may use the console, with which role, over which users.

.. code-block:: yaml

    operators:
      - name: sam              # written into the audit log
        role: edit             # read | edit
        token_sha256: 5e88...  # the digest of sam's token, never the token itself
        users: [alice, "team-a/*"]   # optional: only these users (a trailing * is a prefix)

``deermem console --add-operator NAME --role ROLE --operators FILE`` appends an entry with a new
random token and shows the token once. A mistake names the file, the line and the key, as the
memory config's errors do; a file that cannot be read keeps the console from starting rather than
starting it open.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Any

import yaml

from deermem_middleware.config.models import ConfigError
from deermem_middleware.config.yaml_source import Key, YamlDoc, at, read_yaml
from deermem_middleware.console.auth import ROLES, Operator, token_digest

__all__ = ["add_operator", "load_operators"]

_DIGEST = re.compile(r"^[0-9a-f]{64}$")
_KEYS = frozenset({"name", "role", "token_sha256", "users"})


def load_operators(path: Path) -> list[tuple[str, Operator]]:
    """``(token digest, operator)`` for every entry of the file; :class:`ConfigError` naming
    file, line and key for any mistake (an unknown key, a bad role, a digest that is not 64 hex
    digits, two entries with one token)."""
    doc = read_yaml(path)
    data = doc.data
    if data is None:
        return []
    if not isinstance(data, dict) or not isinstance(data.get("operators", []), list):
        raise ConfigError(f"{doc.where(())}: expected a mapping with an 'operators' list")
    out: list[tuple[str, Operator]] = []
    seen: dict[str, str] = {}
    for index, entry in enumerate(data.get("operators") or []):
        key: Key = ("operators", index)
        out.append(_entry(doc, key, entry))
        digest, operator = out[-1]
        if digest in seen:
            raise ConfigError(
                f"{at(doc, (*key, 'token_sha256'))}: the same token as operator {seen[digest]!r}"
            )
        seen[digest] = operator.name
    return out


def _entry(doc: YamlDoc, key: Key, entry: Any) -> tuple[str, Operator]:
    if not isinstance(entry, dict):
        raise ConfigError(f"{at(doc, key)}: each operator is a mapping (name, role, token_sha256)")
    unknown = sorted(str(k) for k in entry if k not in _KEYS)
    if unknown:
        raise ConfigError(
            f"{at(doc, (*key, unknown[0]))}: unknown key (known: {', '.join(sorted(_KEYS))})"
        )
    for name in ("name", "token_sha256"):
        if not isinstance(entry.get(name), str) or not entry[name].strip():
            raise ConfigError(f"{at(doc, (*key, name))}: required, a non-empty string")
    digest = entry["token_sha256"].strip().lower()
    if not _DIGEST.fullmatch(digest):
        raise ConfigError(
            f"{at(doc, (*key, 'token_sha256'))}: must be the 64 hex digits of a SHA-256 digest"
        )
    role = entry.get("role", "read")
    if role not in ROLES:
        raise ConfigError(
            f"{at(doc, (*key, 'role'))}: must be one of {', '.join(ROLES)}, got {role!r}"
        )
    users = entry.get("users")
    if users is not None and (
        not isinstance(users, list) or not all(isinstance(u, str) and u for u in users)
    ):
        raise ConfigError(f"{at(doc, (*key, 'users'))}: must be a list of user ids")
    return digest, Operator(
        entry["name"].strip(), role, None if users is None else frozenset(users)
    )


def add_operator(
    path: Path, name: str, role: str, users: list[str] | None = None
) -> tuple[str, Operator]:
    """Append an operator with a new random token to ``path`` (created if missing); returns the
    token (shown once) and the operator. The file is read first, so a broken file stays as it
    is and the error names it."""
    entries = load_operators(path) if path.exists() else []
    operator = Operator(name, role, None if not users else frozenset(users))  # type: ignore[arg-type]
    if any(o.name == operator.name for _, o in entries):
        raise ConfigError(f"{path}: an operator named {name!r} exists")
    token = secrets.token_urlsafe(32)
    data = (yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None) or {}
    item: dict[str, Any] = {"name": operator.name, "role": operator.role}
    item["token_sha256"] = token_digest(token)
    if operator.users is not None:
        item["users"] = sorted(operator.users)
    data.setdefault("operators", []).append(item)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(0o600)
    tmp.replace(path)
    return token, operator
