"""Twenty concurrent runs across two workers while workers are SIGKILLed at random moments."""

from __future__ import annotations

import random
import time

import pytest

from agent_core.choices import RUN_TERMINAL, CallStatus, RunStatus
from agent_core.models import Run, ToolCall
from approvals import services as port
from demo.models import MailerSend, Refund
from tests.conftest import ALICE, wait_for

from .conftest import Cluster, assert_frames_gapless, start

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("shop")]

RUNS = 20
KILLS = 8
LOOKUP = '/call lookup_order {"order_id": "A-1002"}'
ACTIONS = [
    '/call issue_refund {"order_id": "A-1001", "amount": 1}',  # atomic
    '/call send_campaign {"campaign_id": "spring-sale"}',  # recover()
    '/call notify_customer {"order_id": "A-1001"}',  # idempotent
]
# Every step takes a moment, so kills land inside tools as well as between steps.
DELAYS = {
    "DEMO_REFUND_DELAY": "0.3",
    "DEMO_MAILER_DELAY": "0.3",
    "AIRLOCK_TEST_NOTIFY_DELAY": "0.3",
}


def approve_pending() -> None:
    for call_id in ToolCall.objects.filter(status=CallStatus.PENDING_APPROVAL).values_list(
        "pk", flat=True
    ):
        port.approve(call_id, actor=ALICE)


def test_twenty_runs_survive_random_kills_with_every_effect_exactly_once(
    cluster: Cluster,
) -> None:
    seed = random.randrange(1_000_000)
    rng = random.Random(seed)
    cluster.beat()
    workers = [cluster.worker(**DELAYS), cluster.worker(**DELAYS)]
    runs = [start(f"{LOOKUP}\n{ACTIONS[i % len(ACTIONS)]}") for i in range(RUNS)]
    for _ in range(KILLS):
        deadline = time.monotonic() + rng.uniform(0.2, 1.5)
        while time.monotonic() < deadline:
            approve_pending()
            time.sleep(0.05)
        victim = rng.randrange(len(workers))
        cluster.kill(workers[victim])
        workers[victim] = cluster.worker(**DELAYS)

    def all_settled() -> bool:
        approve_pending()
        return not Run.objects.exclude(status__in=RUN_TERMINAL).exists()

    wait_for(f"every run to settle (seed {seed})", all_settled, cluster)
    assert Run.objects.count() == RUNS
    assert set(Run.objects.values_list("status", flat=True)) == {RunStatus.COMPLETED}, seed
    actions = ToolCall.objects.filter(kind="action")
    assert actions.count() == RUNS
    for call in actions:
        assert call.status == CallStatus.SUCCEEDED, (seed, call.pk, call.status)
        assert call.decided_by_ref == ALICE.ref
        if call.tool_name == "issue_refund":
            assert Refund.objects.filter(tool_call_id=call.pk).count() == 1, (seed, call.pk)
        else:
            key = f"airlock-{call.pk}"
            assert MailerSend.objects.filter(idempotency_key=key).count() == 1, (seed, call.pk)
    assert Refund.objects.count() + MailerSend.objects.count() == RUNS
    for run in runs:
        assert_frames_gapless(run.pk)
