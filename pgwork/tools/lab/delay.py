"""A TCP proxy that delays every chunk by half a round-trip time in each direction, so clients on
loopback see a network hop (tc netem needs a network namespace and CAP_NET_ADMIN; this needs
nothing). Order is kept per direction; throughput is not limited: only latency is added."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time

from psycopg.conninfo import conninfo_to_dict, make_conninfo


class DelayProxy:
    """127.0.0.1:`port` -> `host`:`target_port` (or the server's Unix socket when `host` is a directory),
    each chunk forwarded `rtt / 2` seconds after it arrived."""

    def __init__(self, dsn: str, rtt: float) -> None:
        params = conninfo_to_dict(dsn)
        self.host = str(params.get("host") or "127.0.0.1")
        self.target_port = int(params.get("port") or 5432)
        self.delay = rtt / 2
        self._dsn = dsn
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self._thread = threading.Thread(target=self._serve, daemon=True, name="pgwork-lab-delay")
        self._thread.start()
        self._ready.wait(10)

    def dsn(self, dsn: str | None = None) -> str:
        """`dsn` (default the one given) through the proxy."""
        return make_conninfo(dsn or self._dsn, host="127.0.0.1", port=str(self.port), hostaddr="")

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", self.port))
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            self._loop.run_until_complete(server.wait_closed())
            self._loop.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if self.host.startswith("/"):  # a socket directory, as libpq reads it (an embedded server)
                path = f"{self.host}/.s.PGSQL.{self.target_port}"
                up_reader, up_writer = await asyncio.open_unix_connection(path)
            else:
                up_reader, up_writer = await asyncio.open_connection(self.host, self.target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        chunks: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def forward() -> None:
            while True:
                due, data = await chunks.get()
                if not data:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()

        sender = asyncio.ensure_future(forward())
        try:
            while data := await reader.read(65536):
                chunks.put_nowait((time.monotonic() + self.delay, data))
        finally:
            chunks.put_nowait((0.0, b""))
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await sender
            writer.close()

    def close(self) -> None:
        """Every proxied connection cut, the listener closed, the thread gone."""

        async def shutdown() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop)
        self._thread.join(5)
