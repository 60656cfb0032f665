"""An empty durable cycle: a Celery task that does nothing but enqueue the next one.

Before chaining, a durable approval cycle was five step tasks (three model steps, two tool
steps), each enqueued by the step before it, alternating ``agent.llm`` and ``agent.tool``.
``empty_cycle`` sends five tasks the same way, through the same broker and worker, and does no
work at all: the part of a cycle's time no implementation of "every step a Celery task" can go
under (a chaining task now takes the cycle in two tasks). The worker
imports this module with ``-I bench.hops``.
"""

from __future__ import annotations

import time
import uuid
from functools import cache

import redis
from celery import current_app, shared_task
from django.conf import settings

from agent_core.conf import agent_settings

HOP_TASK = "bench.hop"
CYCLE_HOPS = 5  # llm:0, the read tool, llm:1 | approve | the action tool, llm:2


@cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


def _send(left: int, key: str) -> None:
    queues = agent_settings()
    queue = queues.MODEL_QUEUE if left % 2 == 0 else queues.TOOL_QUEUE
    current_app.send_task(HOP_TASK, args=[left, key], queue=queue)


@shared_task(name=HOP_TASK, acks_late=True, ignore_result=True)
def hop(left: int, key: str) -> None:
    """Pass on to the next hop, or, as the last one, say when the chain ended."""
    if left:
        _send(left - 1, key)
    else:
        _redis().rpush(key, repr(time.time()))


def empty_cycle() -> float:
    """Seconds from sending the first of ``CYCLE_HOPS`` chained tasks to the last one's end."""
    key = f"bench:hops:{uuid.uuid4().hex}"
    start = time.time()
    _send(CYCLE_HOPS - 1, key)
    found = _redis().blpop([key], timeout=30)
    if found is None:
        raise RuntimeError("the worker did not finish the hop chain within 30 s")
    return float(found[1]) - start
