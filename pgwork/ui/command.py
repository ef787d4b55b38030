"""`pgwork ui`: serve the console. Importable without the `ui` extra: the extra's modules are
imported when the command runs, and the CLI names the extra when one is missing (cli.EXTRAS)."""

from __future__ import annotations

import argparse
import os
import sys

from pgwork.dsn import describe, resolve_dsn


def configure(p: argparse.ArgumentParser) -> None:
    p.set_defaults(func=cmd_ui)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; others need --auth)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    p.add_argument(
        "--auth",
        choices=("none", "basic", "proxy"),
        default=None,
        help="basic: PGWORK_UI_USER and PGWORK_UI_PASSWORD; proxy: trust --user-header from a reverse proxy; "
        "none: localhost only (default: basic when those variables are set, else none)",
    )
    p.add_argument("--user-header", default=None, help="the header a trusted proxy sets (default X-Forwarded-User)")
    p.add_argument(
        "--live",
        choices=("sse", "poll"),
        default="sse",
        help="how pages stay fresh: server-sent events (default) or the browser polling",
    )
    p.add_argument(
        "--no-listen",
        action="store_true",
        help="never LISTEN (behind a transaction-mode pooler such as PgBouncer): refresh every --interval",
    )
    p.add_argument("--interval", type=float, default=2.0, help="seconds between live refreshes (default 2)")
    p.add_argument("--stuck-after", type=float, default=60.0, help="heartbeat age that marks a job stuck (default 60s)")
    p.add_argument("--secure-cookie", action="store_true", help="send the CSRF cookie over HTTPS only (behind TLS)")


def cmd_ui(args: argparse.Namespace) -> int:
    import uvicorn

    from pgwork.ui.app import Settings, create_app
    from pgwork.ui.data import Console
    from pgwork.ui.security import ConfigError, auth_config

    try:
        auth = auth_config(args.auth, args.host, os.environ, args.user_header)
    except ConfigError as exc:
        print(f"pgwork ui: {exc}", file=sys.stderr)
        return 2
    if not 1 <= args.port <= 65535 or not args.interval > 0 or not args.stuck_after > 0:
        print("pgwork ui: --port must be 1..65535, --interval and --stuck-after above 0", file=sys.stderr)
        return 2
    dsn = resolve_dsn(args.dsn)
    console = Console(dsn, prepare=not args.no_listen)
    settings = Settings(
        auth=auth,
        live=args.live,
        interval=args.interval,
        listen=not args.no_listen,
        stuck_after=args.stuck_after,
        secure_cookie=args.secure_cookie,
    )
    print(f"pgwork ui: http://{args.host}:{args.port}/ on {describe(dsn)} (auth {auth.mode})", flush=True)
    try:
        uvicorn.run(
            create_app(console, settings),
            host=args.host,
            port=args.port,
            log_level="warning",
            server_header=False,
            proxy_headers=False,
            # Event streams never end by themselves: give them a second, then close them.
            timeout_graceful_shutdown=1,
        )
    finally:
        console.close()
    return 0
