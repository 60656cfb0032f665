"""Benchmark: the console's inbox with 10,000 pending calls visible to the user (issue #19).

    DATABASE_URL=postgres://…/airlock python bench/inbox.py [--requests 50]
                                                            [--at-scale [--reuse] [--sort newest]]

Uses the database ``<name>_bench_inbox`` next to ``DATABASE_URL`` (created if missing, its agent
tables emptied and refilled by ``bench.database.bulk_load``): 10,000 threads, each with one waiting
run and one pending ``issue_refund`` call for ``finance`` (a summary on every call, a deadline on
half of them). In process (Django's test client, no network), as the finance approver fran (all
10,000 are *Waiting on you*) and the operator otto (all 10,000 *Waiting on others*):

- the HTML size and server time (median, p99) of the inbox's first page, in each order, with a
  search, and of a page 5,000 rows deep;
- what a live update moves for one changed card: the WebSocket event and the row the page then
  fetches (body and response headers).

With ``--at-scale``, on the pending benchmark's data instead (``<name>_bench``, 1,000,000 calls of
which 10,000 pending, ``bench.pending.shape``; ``--reuse`` keeps it if loaded): the first page of
each tab (in ``--sort``'s order, oldest first by default), server time (median, p99 over
``--requests``, default 200 there), as the finance approver fran, the requester alice (whose
threads hold 2,000 pending calls) and the operator otto.
The process is settled first as a web worker is (``agent_core.gunicorn.post_worker_init``: the
URLconf loaded, start-up frozen out of the collector); each row also gives the median CPU time of
this process per request (the Python side, PostgreSQL's not counted) and counts the collections of
each generation during its requests, their total pause and the longest (``gc.callbacks``).
Before the table, the machine's own spread: a fixed ~20 ms of pure Python with the collector
off, 200 times (no database, no Django), its median and p99: what the p99 of a page cannot be
expected to beat.

Targets: first page ≤ 100 KB and ≤ 200 ms server time; a live update ≤ 5 KB per changed card
(issue #19); the first page's p99 ≤ 20 ms server time (issue 18), printed as met / not met.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.database import Shape, bench_database_url, bulk_load, setup_django  # noqa: E402
from bench.pending import percentiles  # noqa: E402

PENDING = 10_000

FIRST_PAGE_P99_MS = 20  # issue 18: the inbox's first page, server time


def shape(alice: str) -> Shape:
    """10,000 waiting runs of ``alice``'s, one pending refund each for finance; a summary on
    every call, a deadline on half of them."""
    created = "now() - interval '2 days' + g * interval '10 seconds'"
    return Shape(
        tag="i",
        threads=PENDING,
        calls=1,
        owner=f"'{alice}'",
        title="'inbox bench ' || g",
        created=created,
        run_status="'waiting'",
        tool_name="'issue_refund'",
        args="jsonb_build_object('order_id', 'A-' || (1000 + g % 900), 'amount',"
        " (20 + g % 400)::text, 'reason', 'Parcel arrived damaged; customer sent photos')",
        status="'pending_approval'",
        approver="'finance'",
        requested_at=created,
        expires_at="CASE WHEN g % 2 = 0 THEN now() + g * interval '1 minute' END",
        summary="'Refund ' || (20 + g % 400) || '.00 on order A-' || (1000 + g % 900)"
        " || ' — Jane Doe, order total ' || (500 + g % 400) || '.00'",
    )


def measure(
    client: Any, url: str, params: dict[str, str], n: int
) -> tuple[int, float, float, float]:
    """The body size of ``GET url``, its server time (median, p99 over ``n`` requests) and the
    median CPU time of this process per request (PostgreSQL's not counted)."""
    for _ in range(5):
        response = client.get(url, params)
        assert response.status_code == 200, response.status_code
    samples, cpu = [], []
    for _ in range(n):
        started, cpu_started = time.perf_counter(), time.thread_time()
        response = client.get(url, params)
        samples.append(time.perf_counter() - started)
        cpu.append(time.thread_time() - cpu_started)
    return len(response.content), *percentiles(samples), percentiles(cpu)[0]


class Collections:
    """The collector's pauses while it is entered: collections per generation, their total
    and the longest."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.seconds = self.longest = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.count[info["generation"]] += 1
            pause = time.perf_counter() - self._started
            self.seconds += pause
            self.longest = max(self.longest, pause)

    def __enter__(self) -> Collections:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)

    def __str__(self) -> str:
        counts = "/".join(map(str, self.count))
        return f"{counts} ({self.seconds * 1000:.1f} ms, longest {self.longest * 1000:.1f})"


def machine_spread(n: int = 200) -> tuple[float, float]:
    """Median and p99 ms of the same ~20 ms of pure Python, ``n`` times, the collector off."""
    samples = []
    gc.disable()
    try:
        for _ in range(n):
            started = time.perf_counter()
            total = 0
            for i in range(300_000):
                total += i * i % 7
            samples.append(time.perf_counter() - started)
    finally:
        gc.enable()
    return percentiles(samples)


def headers_size(response: Any) -> int:
    """The response's status line and headers as they go on the wire (HTTP/1.1)."""
    lines = [f"HTTP/1.1 {response.status_code} {response.reason_phrase}"]
    lines += [f"{k}: {v}" for k, v in response.items()]
    return len("\r\n".join(lines).encode()) + 4


def users() -> dict[str, Any]:
    """fran of finance and alice the requester (staff: the console's own runs), otto the
    operator (a console role). ``bench/pending.py`` makes fran and alice without staff."""
    from django.contrib.auth.models import Group, User

    User.objects.filter(username__in=["bench-fran", "bench-alice"]).update(is_staff=True)
    fran, _ = User.objects.get_or_create(username="bench-fran", defaults={"is_staff": True})
    fran.groups.add(Group.objects.get_or_create(name="finance")[0])
    otto, _ = User.objects.get_or_create(username="bench-otto")
    otto.groups.add(Group.objects.get_or_create(name="operator")[0])
    alice, _ = User.objects.get_or_create(username="bench-alice", defaults={"is_staff": True})
    return {"fran": fran, "otto": otto, "alice": alice}


def logged_in(user: Any) -> Any:
    from django.test import Client

    client = Client(SERVER_NAME="localhost")  # an ALLOWED_HOSTS name
    client.force_login(user)
    return client


def tabs(user: Any) -> str:
    """The two tabs' counts as ``user`` sees them."""
    from agent_core.actors import actor_for_user
    from approvals.selectors import pending_count
    from console.listing import listing

    actor = actor_for_user(user)
    counts = listing(actor, {}, waiting_on_you=pending_count(actor)).counts
    return f"{counts['yours']:,} / {counts['others']:,}"


def at_scale(n: int, *, reuse: bool, sort: str | None = None) -> None:
    """The first page of each tab at 1M calls / 10k pending, for each viewer (in ``sort``'s
    order; the default, oldest first, without)."""
    setup_django(bench_database_url("_bench"))
    from django.urls import reverse

    from agent_core import gunicorn
    from bench import pending

    people = users()
    pending.load(f"user:{people['alice'].pk}", reuse=reuse)
    inbox = reverse("console:inbox")
    gunicorn.post_worker_init(worker=None)  # what a web worker does before its first request
    median, p99 = machine_spread()
    print(f"\nthe machine: ~20 ms of pure Python, median {median:.1f} ms, p99 {p99:.1f} ms")
    print(
        "\n| viewer | tab | tab counts (you / others) | median ms | p99 ms "
        f"| p99 ≤ {FIRST_PAGE_P99_MS} ms | Python CPU median ms "
        "| collections 0/1/2 (pause, longest) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for who in ("fran", "alice", "otto"):
        client = logged_in(people[who])
        ordered = {"sort": sort} if sort else {}
        for tab, params in (
            ("Waiting on you", ordered),
            ("Waiting on others", {"show": "others", **ordered}),
        ):
            with Collections() as collections:
                _, median, p99, cpu = measure(client, inbox, params, n)
            verdict = "met" if p99 <= FIRST_PAGE_P99_MS else "not met"
            print(
                f"| {who} | {tab} | {tabs(people[who])} | {median:.1f} | {p99:.1f} | {verdict} "
                f"| {cpu:.1f} | {collections} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, help="requests per measurement (50; 200 at scale)")
    parser.add_argument("--at-scale", action="store_true", help="1M calls / 10k pending, each tab")
    parser.add_argument("--reuse", action="store_true", help="at scale: keep data already loaded")
    parser.add_argument("--sort", choices=["oldest", "newest", "deadline"], help="at scale: order")
    args = parser.parse_args()
    if args.at_scale:
        at_scale(args.requests or 200, reuse=args.reuse, sort=args.sort)
        return
    args.requests = args.requests or 50
    setup_django(bench_database_url("_bench_inbox"))
    from django.urls import reverse

    from agent_core.models import ToolCall
    from approvals.api.filters import PendingPagination

    people = users()
    bulk_load(shape(f"user:{people['alice'].pk}"))

    inbox = reverse("console:inbox")
    deep = PendingPagination().cursor_after(
        "oldest", ToolCall.objects.order_by("requested_at", "id")[4_999]
    )
    cases = [
        ("fran", "first page, oldest first", {}),
        ("fran", "first page, deadline soonest", {"sort": "deadline"}),
        ("fran", "first page, newest first", {"sort": "newest"}),
        ("fran", "search “A-1042”", {"q": "A-1042"}),
        ("fran", "page after 5,000", {"cursor": deep}),
        ("otto", "Waiting on others, first page", {"show": "others"}),
    ]
    clients = {name: logged_in(people[name]) for name in ("fran", "otto")}
    print(f"\n| viewer | page | HTML KB | median ms | p99 ms | p99 ≤ {FIRST_PAGE_P99_MS} ms |")
    print("|---|---|---|---|---|---|")
    for who, label, params in cases:
        size, median, p99, _ = measure(clients[who], inbox, params, args.requests)
        verdict = ("met" if p99 <= FIRST_PAGE_P99_MS else "not met") if "first" in label else "—"
        print(f"| {who} | {label} | {size / 1000:.1f} | {median:.1f} | {p99:.1f} | {verdict} |")

    call = ToolCall.objects.order_by("requested_at", "id").first()
    assert call is not None
    event = {
        "type": "event",
        "event": "approval_settled",
        "run_id": call.run_id,
        "call_id": call.pk,
    }
    row_url = reverse("console:call_row", args=[call.pk])
    row = clients["fran"].get(row_url, {"sort": "deadline"}, HTTP_X_CONSOLE_FRAGMENT="1")
    assert row.status_code == 200
    ws = len(json.dumps(event).encode())
    body, head = len(row.content), headers_size(row)
    print("\n| a live update of one card | bytes |")
    print("|---|---|")
    print(f"| WebSocket event | {ws} |")
    print(f"| the row's response (body {body} + headers {head}) | {body + head} |")
    print(f"| total | {ws + body + head} |")


if __name__ == "__main__":
    main()
