"""A TCP proxy that delays every chunk by a fixed time each way, to measure the benchmarks as if
PostgreSQL were across a network (``bench/sql_floor.py`` through it: what a round trip costs).

    python bench/delay_proxy.py 55433 5432 0.25   # listen, PostgreSQL's port, ms each way
    DATABASE_URL=postgres://postgres@127.0.0.1:55433/airlock_x ... bench/sql_floor.py

Two threads a direction (one reads and stamps, one writes when the stamp is due), so a chunk is
delayed by the set time, not by the chunks before it. On a loaded machine the threads wake late:
measure the round trip it gives (a ``SELECT 1``) rather than assume twice the delay.
"""

from __future__ import annotations

import queue
import socket
import sys
import threading
import time


def pump(source: socket.socket, target: socket.socket, delay: float) -> None:
    """Copy ``source`` to ``target``, each chunk ``delay`` seconds after it arrived."""
    due: queue.SimpleQueue[tuple[float, bytes]] = queue.SimpleQueue()

    def read() -> None:
        data = b"."
        while data:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            due.put((time.perf_counter() + delay, data))

    def write() -> None:
        while True:
            at, data = due.get()
            time.sleep(max(0.0, at - time.perf_counter()))
            try:
                if not data:
                    target.shutdown(socket.SHUT_WR)
                    return
                target.sendall(data)
            except OSError:
                return

    threading.Thread(target=read, daemon=True).start()
    threading.Thread(target=write, daemon=True).start()


def main() -> None:
    listen, upstream, delay_ms = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    server = socket.create_server(("127.0.0.1", listen))
    while True:
        client, _ = server.accept()
        database = socket.create_connection(("127.0.0.1", upstream))
        for end in (client, database):
            end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as libpq sets it
        pump(client, database, delay_ms / 1e3)
        pump(database, client, delay_ms / 1e3)


if __name__ == "__main__":
    main()
