"""A thread service (SPEC §16) run in a process of its own that stops for good right after a
given statement, inside the service's transaction, so that a crash test can SIGKILL it there.

``python -m tests.durable.interrupted <statement start> fork <thread> <message> <actor ref>``
or ``… regenerate <thread> <actor ref>``; it prints ``paused`` once it stopped.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import django

FOREVER = 600  # seconds; the test kills the process long before


def main(argv: list[str]) -> None:
    django.setup()
    from django.db import connection

    from agent_core.actors import Actor
    from agent_core.conversation import history
    from agent_core.models import Thread

    statement, service, thread_id, *rest = argv

    def pause(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        result = execute(sql, *args)
        if sql.startswith(statement):
            print("paused", flush=True)
            time.sleep(FOREVER)
        return result

    thread = Thread.objects.get(pk=thread_id)
    with connection.execute_wrapper(pause):
        if service == "fork":
            history.fork(thread, rest[0], actor=Actor(ref=rest[1]))
        else:
            history.regenerate(thread, actor=Actor(ref=rest[0]))
    print("finished", flush=True)  # never reached when the statement is the service's


if __name__ == "__main__":
    main(sys.argv[1:])
