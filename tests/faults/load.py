"""The load the fault tests put on a layout while a fault happens (SPEC §20), and the invariants
they check after it: ``RUNS`` runs parked on a refund; a third approved and followed by open
streams before the fault (their refunds executing when it hits), a third approved during it, the
rest after it heals."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import connect_sse

from tests.conftest import refund
from tests.live.conftest import ALICE, start

RUNS = 20

Rows = Callable[[str], list[tuple[Any, ...]]]


@dataclass
class Target:
    """Where the load goes: the API (``web``), the streams (``streams``), and the database the
    checks read (``rows``: a statement's rows)."""

    web: str
    streams: str
    rows: Rows


class Follower(threading.Thread):
    """An SSE client of one run that reconnects after a dropped stream or a 503 with the last
    id it has (``Last-Event-ID``), until the run's stream ends: the frame ids it got."""

    def __init__(self, url: str, run_id: str) -> None:
        super().__init__(daemon=True)
        self.url, self.run_id, self.got = url, run_id, list[int]()
        self.ended = False

    def run(self) -> None:
        deadline = time.monotonic() + 120  # a guard: the test fails on ``ended``
        while not self.ended and time.monotonic() < deadline:
            try:
                self._attach()
            except httpx.TransportError:
                time.sleep(0.2)

    def _attach(self) -> None:
        last = str(self.got[-1] if self.got else 0)
        with (
            httpx.Client(base_url=self.url, timeout=60) as client,
            connect_sse(
                client,
                "GET",
                f"/agent/chat/{self.run_id}/stream",
                headers={**ALICE, "Last-Event-ID": last},
            ) as source,
        ):
            if source.response.status_code == 503:
                time.sleep(1)
                return
            for event in source.iter_sse():
                if event.event == "message":  # a frame (a named event repeats the last id)
                    self.got.append(int(event.id))
                if event.event in ("done", "error"):
                    self.ended = True
                    return


@dataclass
class Answers:
    """Every answer the API gave while the fault was on: status and ``Retry-After``; the calls
    it acknowledged; the open streams; when the fault was over."""

    statuses: list[tuple[int, str | None]] = field(default_factory=list)
    approved: list[str] = field(default_factory=list)
    followers: list[Follower] = field(default_factory=list)
    healed: float = 0.0


def approve(client: httpx.Client, call_id: str, answers: Answers) -> None:
    try:
        response = client.post(
            "/agent/tool-call/approve", json={"tool_call_id": call_id}, headers=ALICE
        )
    except httpx.TransportError:
        return  # no answer: nothing acknowledged
    answers.statuses.append((response.status_code, response.headers.get("Retry-After")))
    if response.status_code == 200:
        answers.approved.append(call_id)


def parked(target: Target, client: httpx.Client) -> list[tuple[str, str]]:
    """``RUNS`` runs parked on a refund: their calls' and runs' ids."""
    runs = [start(client, refund(50), ALICE)["run_id"] for _ in range(RUNS)]
    wait = f"SELECT count(*) FROM agent_core_run WHERE status = 'waiting' AND id IN {in_(runs)}"
    until("every run parks", lambda: target.rows(wait)[0][0] == RUNS)
    calls = f"SELECT id, run_id FROM agent_core_toolcall WHERE run_id IN {in_(runs)}"
    return [(row[0], row[1]) for row in target.rows(calls)]


def in_(ids: list[str]) -> str:
    return "(" + ", ".join(f"'{i}'" for i in ids) + ")"


def until(what: str, holds: Callable[[], bool], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not holds():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def fault_under_load(
    target: Target,
    fault: Callable[[], None],
    *,
    during: Callable[[str, str], None] = lambda call_id, run_id: None,
) -> Answers:
    """Approve a third of the parked calls, followed by open streams, then the next third while
    ``fault`` happens (the first third's refunds executing), then the rest after it; ``during``:
    what else befalls each call of the second third once it is approved."""
    answers = Answers()
    with httpx.Client(base_url=target.web, timeout=30) as client:
        calls = parked(target, client)
        third = RUNS // 3
        first, middle, after = calls[:third], calls[third : 2 * third], calls[2 * third :]
        for call_id, run_id in first:
            follower = Follower(target.streams, run_id)
            follower.start()
            answers.followers.append(follower)
            approve(client, call_id, answers)
        faulting = threading.Thread(target=fault)
        faulting.start()
        for call_id, run_id in middle:
            approve(client, call_id, answers)
            during(call_id, run_id)
        faulting.join()
        answers.healed = time.monotonic()
        for call_id, _ in after:
            approve(client, call_id, answers)
    return answers


def check_answers(answers: Answers) -> None:
    """The API answered, or said when to come back: never a 500."""
    assert all(status in (200, 503) for status, _ in answers.statuses), answers.statuses
    assert all(wait is not None for status, wait in answers.statuses if status == 503)


def check_settled(target: Target, answers: Answers, within: float) -> None:
    """Every run ends or parks within ``within`` seconds of the fault's end."""
    active = "SELECT count(*) FROM agent_core_run WHERE status IN ('queued', 'running')"
    left = within - (time.monotonic() - answers.healed)
    until("every run to end or park", lambda: target.rows(active)[0][0] == 0, left)


def check_decisions_and_effects(target: Target, answers: Answers) -> None:
    """Every acknowledged approval is in the call and the audit; one refund per call that
    succeeded, none twice."""
    decided = target.rows(
        "SELECT c.id, c.status, count(a.id) FROM agent_core_toolcall c"
        " LEFT JOIN approvals_decisionattempt a ON a.tool_call_id = c.id AND a.outcome = 'applied'"
        f" WHERE c.id IN {in_(answers.approved)} GROUP BY c.id, c.status"
    )
    assert len(decided) == len(answers.approved)
    assert all(status != "pending_approval" and audited >= 1 for _, status, audited in decided)
    refunds = target.rows(
        "SELECT c.id, c.status, count(r.id) FROM agent_core_toolcall c"
        " LEFT JOIN demo_refund r ON r.tool_call_id = c.id GROUP BY c.id, c.status"
    )
    assert all(n == (1 if status == "succeeded" else 0) for _, status, n in refunds), refunds


def unended_streams(target: Target, followers: list[Follower], within: float) -> list[str]:
    """Open streams delivered every frame, in order, across the fault, and each frame once
    (asserted); the ones that did not end within ``within`` seconds (returned)."""
    unended = []
    for follower in followers:
        follower.join(within)
        if not follower.ended:
            unended.append(f"{follower.run_id}: not ended after {follower.got}")
            continue
        run = f"'{follower.run_id}'"
        stored = target.rows(
            f"SELECT seq FROM agent_core_streamframe WHERE run_id = {run} ORDER BY seq"
        )
        assert follower.got == [seq for (seq,) in stored], follower.run_id
    return unended
