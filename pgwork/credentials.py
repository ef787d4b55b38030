"""A connection string (from a Secret, --dsn or DATABASE_URL): its shape checked in our own words,
and every text that may quote it scrubbed. Pure. The one scrubbing function, `scrub`, serves the
operator, the CLI, the worker's log, Queue/AsyncQueue/App and the lab alike.

libpq quotes what it could not parse (`missing "=" after "hunter2"`, `unexpected spaces found in
"my pass"`), and a password holding an unencoded `@` or `/` moves part of it into the host, port or
database name, which later messages quote. So a value that does not parse, or parses into a host,
port or database name that cannot be meant, is refused here, before anything connects, with a
message that names the shape expected and repeats nothing of the value; and any text that reaches a
status condition, an event, a log line or an exception goes through `scrub` first.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from psycopg.conninfo import conninfo_to_dict

# No run of this many characters of a secret may appear in anything the operator writes.
MIN_FRAGMENT = 4
EXPECTED = (
    "expected a PostgreSQL connection string: postgresql://USER:PASSWORD@HOST:PORT/DBNAME "
    "(percent-encode @ / : # ? % and spaces in the password: %40 %2F %3A %23 %3F %25 %20) "
    "or key=value pairs such as host=db dbname=app user=app password='...'"
)
_URI = re.compile(r"postgres(ql)?://", re.IGNORECASE)
# Up to the last @ of the token: a password with an unescaped @ in it ("p@ss") must not leave
# its tail ("ss@host") behind. Over-redacting a host is the safe side.
_URI_PASSWORD = re.compile(r"(postgres(?:ql)?://[^:/@\s]*:)(\S*)(@)")
# libpq lets an unquoted value escape a space with a backslash: password=abc\ def is "abc def".
_KV_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|(?:\\.|[^\s\\])+)", re.IGNORECASE)
# A host name, an IPv4/IPv6 address (libpq drops the brackets; %zone allowed), or empty.
_HOST = re.compile(r"[A-Za-z0-9._:%\-]*")
_PORT = re.compile(r"[0-9]+")


def dsn_problem(value: str) -> str | None:
    """Why `value` cannot be a connection string, in words that quote none of it; None if it can."""
    if not value.strip():
        return "is empty (the operator would connect with its own environment's defaults)"
    if "\x00" in value:
        return "holds a NUL character (libpq would cut the value there)"
    is_uri = bool(_URI.match(value.lstrip()))
    try:
        params = conninfo_to_dict(value)
    except Exception:
        if is_uri:
            return "is not a valid postgresql:// URI"
        return "is neither a postgresql:// URI nor key=value pairs (a bare password or token?)"
    for host in str(params.get("host") or "").split(","):
        if not host.startswith("/") and not _HOST.fullmatch(host):
            return "has a host that is not a host name (an unencoded @ or / in the password?)"
    for port in str(params.get("port") or "").split(","):
        if port and not _PORT.fullmatch(port):
            return "has a port that is not a number (an unencoded / or : in the password?)"
    if is_uri and any(c in str(params.get("dbname") or "") for c in "@/"):
        return "has a database name holding @ or / (an unencoded / in the password?)"
    return None


def dsn_error(dsn: str) -> str | None:
    """None for a connection string pgwork may hand to libpq (empty: libpq's PG* variables), else
    one line saying what is wrong and the shape expected, quoting nothing of the value."""
    if not dsn.strip():
        return None
    problem = dsn_problem(dsn)
    return None if problem is None else f"the connection string {problem}; {EXPECTED}"


def redact(text: str) -> str:
    """`text` with any password in a URI or key=value connection string replaced by ***."""
    text = _URI_PASSWORD.sub(r"\1***\3", text)
    return _KV_PASSWORD.sub(r"\1***", text)


def sensitive_parts(secret: str) -> list[str]:
    """What of a Secret value no run of MIN_FRAGMENT characters may be shown from: the password
    of a connection string (as given and percent-encoded), or the whole value when it is not a
    connection string (a bare password or a token)."""
    try:
        password = conninfo_to_dict(secret).get("password") if secret.strip() else None
    except Exception:
        return [secret]
    if not password:
        return []
    return list(dict.fromkeys([str(password), quote(str(password), safe=""), quote(str(password))]))


def scrub(text: str, secret: str | None) -> str:
    """`text` without the secret: passwords in connection strings, the whole value, and every
    run of MIN_FRAGMENT or more characters of its sensitive parts replaced by ***. Host, user and
    database names stay, so a message can still say where it failed to connect. pgwork's own
    description of the shape expected (EXPECTED, which quotes nothing) passes unchanged."""
    if EXPECTED in text:
        return EXPECTED.join(scrub(part, secret) for part in text.split(EXPECTED))
    text = redact(text)
    if not secret:
        return text
    text = text.replace(secret, "***")
    for part in sensitive_parts(secret):
        # A short password has no runs to look for; its whole occurrences still go.
        text = _scrub_fragments(text, part) if len(part) >= MIN_FRAGMENT else text.replace(part, "***")
    return text


def _scrub_fragments(text: str, secret: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        length = 0
        if i + MIN_FRAGMENT <= len(text) and text[i : i + MIN_FRAGMENT] in secret:
            length = MIN_FRAGMENT
            while i + length < len(text) and text[i : i + length + 1] in secret:
                length += 1
        if length:
            out.append("***")
            i += length
        else:
            out.append(text[i])
            i += 1
    return "".join(out)
