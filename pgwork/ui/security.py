"""Who may open the console, CSRF tokens and the headers every page carries (pure decisions).

Authentication is on by default outside localhost: binding any other address needs basic auth
(user and password from the environment, e.g. a Kubernetes Secret) or a trusted reverse-proxy
header. CSRF: a random token in a SameSite=Strict, HttpOnly cookie, repeated in every form
(double submit); an action whose form token does not match the cookie is refused.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

CSRF_COOKIE = "pgwork_csrf"
CSRF_FIELD = "csrf"
# No inline script or style anywhere: the console's own files only, forms post to itself, it
# cannot be framed. The charts are inline <svg> elements styled by attributes, which CSP allows.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # same-origin, not no-referrer: with no-referrer Chromium sends "Origin: null" on our own form posts.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
AUTH_MODES = ("none", "basic", "proxy")


class ConfigError(ValueError):
    """A console setting that cannot work: the message names it and the fix."""


@dataclass(frozen=True)
class AuthConfig:
    mode: str = "none"
    user: str | None = None
    password: str | None = None
    header: str = "X-Forwarded-User"

    def __repr__(self) -> str:  # never the password, whatever prints this
        return f"AuthConfig(mode={self.mode!r}, user={self.user!r}, header={self.header!r})"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def auth_config(mode: str | None, host: str, environ: Mapping[str, str], header: str | None = None) -> AuthConfig:
    """The authentication to use: `mode` as asked (None: basic when its variables are set, else
    none on localhost); refused when it would leave a non-local console open."""
    user, password = environ.get("PGWORK_UI_USER"), environ.get("PGWORK_UI_PASSWORD")
    if mode is None:
        mode = "basic" if user and password else "none"
    if mode not in AUTH_MODES:
        raise ConfigError(f"--auth {mode!r}: use one of {', '.join(AUTH_MODES)}")
    if mode == "none" and not is_loopback(host):
        raise ConfigError(
            f"--host {host}: a console reachable beyond this machine needs authentication; set PGWORK_UI_USER and "
            "PGWORK_UI_PASSWORD (--auth basic) or put it behind a proxy that sets a user header (--auth proxy)"
        )
    if mode == "basic" and not (user and password):
        raise ConfigError("--auth basic: set PGWORK_UI_USER and PGWORK_UI_PASSWORD (e.g. from a Secret)")
    return AuthConfig(mode, user, password, header or "X-Forwarded-User")


def authenticate(config: AuthConfig, headers: Mapping[str, str], client_host: str | None) -> str | None:
    """Who is asking (the name the action log records), or None: refuse with 401."""
    if config.mode == "proxy":
        name = headers.get(config.header.lower(), "").strip()
        return name[:200] if name and name.isprintable() else None
    if config.mode == "basic":
        given = _basic(headers.get("authorization", ""))
        if given is None or config.user is None or config.password is None:
            return None
        user_ok = hmac.compare_digest(given[0].encode(), config.user.encode())
        password_ok = hmac.compare_digest(given[1].encode(), config.password.encode())
        return config.user if user_ok and password_ok else None
    return f"local:{client_host or 'unknown'}"


def _basic(header: str) -> tuple[str, str] | None:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic" or not value:
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep else None


def new_token() -> str:
    return secrets.token_urlsafe(32)


def csrf_ok(cookie: str | None, submitted: str | None) -> bool:
    """Whether a form's token matches its cookie (both present, same value)."""
    if not cookie or not submitted or len(cookie) > 200 or len(submitted) > 200:
        return False
    return hmac.compare_digest(cookie.encode(), submitted.encode())
