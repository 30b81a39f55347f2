"""The console's users: a name, a role, an argon2 hash of the password, in one JSON file.

The file (``CONSOLE_USERS_FILE``) is written by ``surveil console users ...`` only, atomically and
with mode 0600; the console reads it again whenever it changes, so a user added or removed
counts at the next login without a restart. It never holds a password, only argon2id hashes
(argon2-cffi's defaults).

What each role may do is ``PERMISSIONS``; the console asks ``may(role, what)`` before it shows a
control and again before it acts.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

Role = Literal["operator", "supervisor", "auditor"]
ROLES: tuple[Role, ...] = get_args(Role)
Permission = Literal["view", "acknowledge", "note", "assign", "close", "export"]

PERMISSIONS: dict[Role, frozenset[Permission]] = {
    "operator": frozenset({"view", "acknowledge", "note"}),
    "supervisor": frozenset({"view", "acknowledge", "note", "assign", "close"}),
    "auditor": frozenset({"view", "export"}),
}

NAME = re.compile(r"^[a-z][a-z0-9._-]{1,31}$")
MIN_PASSWORD = 12

_hasher = PasswordHasher()
# A hash to verify against when the name is unknown, so that a wrong name costs what a wrong
# password costs (no telling which names exist from the time a login takes).
_DUMMY = _hasher.hash("no such user, no such password")


def may(role: str, what: Permission) -> bool:
    return what in PERMISSIONS.get(role, frozenset())  # type: ignore[call-overload]


@dataclass(frozen=True, slots=True)
class User:
    name: str
    role: Role
    password_hash: str


class UserError(ValueError):
    pass


class UserStore:
    """The users file: read again when it changed, written whole (temporary file, rename)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._users: dict[str, User] = {}
        self._stamp: tuple[int, int] | None = None

    def users(self) -> dict[str, User]:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._users, self._stamp = {}, None
            return {}
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            self._users = {
                name: User(name, entry["role"], entry["password_hash"])
                for name, entry in raw.get("users", {}).items()
                if entry.get("role") in ROLES
            }
            self._stamp = stamp
        return self._users

    def authenticate(self, name: str, password: str) -> User | None:
        """The user, when ``password`` is theirs; None otherwise (same cost either way)."""
        user = self.users().get(name)
        try:
            _hasher.verify(user.password_hash if user else _DUMMY, password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return None
        return user

    def get(self, name: str) -> User | None:
        return self.users().get(name)

    def add(self, name: str, role: str, password: str, *, replace: bool = False) -> User:
        if not NAME.match(name):
            raise UserError(f"a user name is 2-32 characters, a-z first, then a-z 0-9 . _ - (not {name!r})")
        if role not in ROLES:
            raise UserError(f"role must be one of {', '.join(ROLES)}")
        if len(password) < MIN_PASSWORD:
            raise UserError(f"a password has at least {MIN_PASSWORD} characters")
        users = dict(self.users())
        if name in users and not replace:
            raise UserError(f"user {name} exists (--replace to set a new password or role)")
        user = User(name, role, _hasher.hash(password))
        users[name] = user
        self._write(users)
        return user

    def remove(self, name: str) -> None:
        users = dict(self.users())
        if users.pop(name, None) is None:
            raise UserError(f"no user {name}")
        self._write(users)

    def _write(self, users: dict[str, User]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = {"users": {u.name: {"role": u.role, "password_hash": u.password_hash} for u in sorted(users.values(), key=lambda u: u.name)}}
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".users-")  # mkstemp: mode 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(body, out, indent=2)
                out.write("\n")
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._stamp = None
