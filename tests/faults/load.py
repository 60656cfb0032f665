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
from tests.faults.layout import IDLE, LEASE, SWEEP, Layout
from tests.live.conftest import ALICE, start

RUNS = 20

Rows = Callable[[str], list[tuple[Any, ...]]]


@dataclass
class Target:
    """Where the load goes: the API (``webs``: each request to the next in turn), the streams
    (``streams``), and the database the checks read (``rows``: a statement's rows)."""

    webs: tuple[str, ...]
    streams: str
    rows: Rows


class Follower(threading.Thread):
    """An SSE client of one run that reconnects after a dropped stream or a 503 with the last
    id it has (``Last-Event-ID``), until the run's stream ends: the frame ids it got."""

    def __init__(self, url: str, run_id: str) -> None:
        super().__init__(daemon=True)
        self.url, self.run_id, self.got = url, run_id, list[int]()
        self.statuses: list[int] = []  # of every attach
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
            self.statuses.append(source.response.status_code)
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
    unanswered: list[str] = field(default_factory=list)  # 503, or no answer: to try again
    followers: list[Follower] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    healed: float = 0.0


def approve(client: httpx.Client, call_id: str, answers: Answers) -> None:
    try:
        response = client.post(
            "/agent/tool-call/approve", json={"tool_call_id": call_id}, headers=ALICE
        )
    except httpx.TransportError:
        answers.unanswered.append(call_id)  # no answer: nothing acknowledged
        return
    answers.statuses.append((response.status_code, response.headers.get("Retry-After")))
    if response.status_code == 200:
        answers.approved.append(call_id)
    else:
        answers.unanswered.append(call_id)


def approve_again(client: httpx.Client, call_id: str) -> None:
    """What a client told 503 (or nothing) does after the fault: approve again until it is
    answered. ``already_decided``: the first try committed after all (its answer was lost with
    the connection), which the audit shows."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            response = client.post(
                "/agent/tool-call/approve", json={"tool_call_id": call_id}, headers=ALICE
            )
        except httpx.TransportError:
            time.sleep(1)
            continue
        if response.status_code == 200:
            return
        if response.status_code == 409:
            assert response.json()["code"] == "already_decided", response.text
            return
        assert response.status_code == 503, response.text
        time.sleep(1)  # Retry-After says 5: shorter here, to keep the test short
    raise AssertionError(f"{call_id} was never approved")


def parked(target: Target, clients: list[httpx.Client]) -> list[tuple[str, str]]:
    """``RUNS`` runs parked on a refund: their calls' and runs' ids."""
    runs = [start(clients[i % len(clients)], refund(50), ALICE)["run_id"] for i in range(RUNS)]
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


def fault_under_load(target: Target, fault: Callable[[], None]) -> Answers:
    """Approve a third of the parked calls, followed by open streams, then the next third while
    ``fault`` happens (the first third's refunds executing), then the rest after it."""
    answers = Answers()
    clients = [httpx.Client(base_url=web, timeout=30) for web in target.webs]
    try:
        calls = parked(target, clients)
        third = RUNS // 3
        first, middle, after = calls[:third], calls[third : 2 * third], calls[2 * third :]
        for i, (call_id, run_id) in enumerate(first):
            follower = Follower(target.streams, run_id)
            follower.start()
            answers.followers.append(follower)
            approve(clients[i % len(clients)], call_id, answers)
        flying = "SELECT count(*) FROM agent_core_run WHERE status = 'running'"
        until("a run in flight when the fault hits", lambda: target.rows(flying)[0][0] > 0, 10)
        faulting = threading.Thread(target=fault)
        faulting.start()
        for i, (call_id, _) in enumerate(middle):
            approve(clients[i % len(clients)], call_id, answers)
        faulting.join()
        answers.healed = time.monotonic()
        for i, (call_id, _) in enumerate(after):
            approve(clients[i % len(clients)], call_id, answers)
        for i, call_id in enumerate(answers.unanswered):
            approve_again(clients[i % len(clients)], call_id)
        answers.runs = [run_id for _, run_id in calls]
    finally:
        for client in clients:
            client.close()
    return answers


def check_answers(answers: Answers) -> None:
    """The API answered, or said when to come back: never a 500."""
    assert all(status in (200, 503) for status, _ in answers.statuses), answers.statuses
    assert all(wait is not None for status, wait in answers.statuses if status == 503)


def check_settled(target: Target, answers: Answers, within: float) -> None:
    """Every run ends or parks within ``within`` seconds of the fault's end; every run of the
    load (all of them approved in the end) completes."""
    active = "SELECT count(*) FROM agent_core_run WHERE status IN ('queued', 'running')"
    left = within - (time.monotonic() - answers.healed)
    until("every run to end or park", lambda: target.rows(active)[0][0] == 0, left)
    ended = target.rows(
        f"SELECT id, status, error_code FROM agent_core_run WHERE id IN {in_(answers.runs)}"
    )
    assert all(status == "completed" for _, status, _ in ended), ended


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
    """Open streams attached with a 200 or a 503 (never a 500) and delivered every frame, in
    order, across the fault, and each frame once (asserted); the ones that did not end within
    ``within`` seconds (returned)."""
    unended = []
    for follower in followers:
        follower.join(within)
        assert all(status in (200, 503) for status in follower.statuses), follower.statuses
        if not follower.ended:
            unended.append(f"{follower.run_id}: not ended after {follower.got}")
            continue
        run = f"'{follower.run_id}'"
        stored = target.rows(
            f"SELECT seq FROM agent_core_streamframe WHERE run_id = {run} ORDER BY seq"
        )
        assert follower.got == [seq for (seq,) in stored], follower.run_id
    return unended


# Past LEASE + SWEEP after a fault of a layout: the runs approved after it (a third of them, and
# those told 503 meanwhile) take their model, tool and model steps, on a 2-core machine that runs
# the whole layout. Measured: every run ended 2-6 s after the fault, approvals included.
MARGIN = 15
SETTLED_WITHIN = LEASE + SWEEP + MARGIN


def target_of(layout: Layout) -> Target:
    """The load on every web host of ``layout`` in turn."""
    webs = tuple(url for name, url in layout.urls.items() if name.startswith("web"))
    return Target(webs, layout.streams, layout.rows)


def check_layout(layout: Layout, answers: Answers) -> None:
    """Every invariant after a fault of ``layout``, and every process recovered on its own: the
    ones the layout started, answering."""
    target = target_of(layout)
    check_answers(answers)
    check_settled(target, answers, SETTLED_WITHIN)
    check_decisions_and_effects(target, answers)
    unended = unended_streams(target, answers.followers, SETTLED_WITHIN)
    assert not unended, unended
    assert layout.alive(), layout.tail()
    for web in target.webs:
        with httpx.Client(base_url=web, timeout=30) as client:
            assert client.get("/agent/approvals/pending", headers=ALICE).status_code == 200


class Freeze:
    """The fault of a host frozen past its lease: SIGSTOP the host while it drives runs, wait past
    its lease and its open transaction's end, then SIGCONT. It keeps the runs the host drove
    (their lease tokens then) and their tokens just before it thawed."""

    def __init__(self, layout: Layout, name: str) -> None:
        self.layout, self.host = layout, layout.hosts[name]
        self.held: dict[str, int] = {}
        self.taken: dict[str, int] = {}

    def __call__(self) -> None:
        until("the host to freeze while it drives a run", self._frozen_driving, 10)
        time.sleep(max(LEASE, IDLE) + SWEEP + 2)
        self.taken.update(
            self.layout.rows(
                "SELECT id, lease_token FROM agent_core_run WHERE id = ANY(%s)", [list(self.held)]
            )
        )
        self.host.thaw()

    def _frozen_driving(self) -> bool:
        """Frozen while it drives a run (read after the freeze: nothing it holds moves)."""
        self.host.freeze()
        owners = {f":{pid}:" for pid in self.host.pids()}
        self.held.update(
            (run_id, token)
            for run_id, owner, token in self.layout.rows(
                "SELECT id, lease_owner, lease_token FROM agent_core_run WHERE status = 'running'"
            )
            if any(pid in owner for pid in owners)
        )
        if not self.held:
            self.host.thaw()
            time.sleep(0.05)
        return bool(self.held)

    def check_taken_over(self) -> None:
        """Another driver leased each run while the host was frozen (SPEC §20)."""
        assert self.held, "the host drove no run when it froze"
        assert all(self.taken[run] > token for run, token in self.held.items()), self.__dict__
