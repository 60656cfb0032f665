"""Runs, a run's page, the audit (and its CSV), the metrics."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from agent_core.choices import RunStatus
from agent_core.models import ToolCall
from approvals import analytics
from approvals import services as port
from approvals.models import DecisionAttempt
from tests.console.conftest import REFUND, actor


@pytest.fixture
def history(turn, decide, people, finance_policy):
    """Three runs: a refund approved, a refund rejected, a refund still waiting."""
    alice, fran = actor(people["alice"]), actor(people["fran"])
    approved = turn(REFUND, actor=alice)
    decide(port.approve, ToolCall.objects.get(run=approved).pk, actor=fran, via="console")
    rejected = turn(REFUND, actor=alice)
    decide(port.reject, ToolCall.objects.get(run=rejected).pk, actor=fran, reason="dup")
    waiting = turn(REFUND, actor=alice)
    return {"approved": approved, "rejected": rejected, "waiting": waiting}


def test_runs_lists_every_run_with_filters(login, history):
    client = login("otto")

    def runs(**q: str) -> list[str]:
        return [r.pk for r in client.get(reverse("console:runs"), q).context["results"].rows]

    assert len(runs()) == 3
    assert runs(status="waiting") == [history["waiting"].pk]
    assert len(runs(status="completed")) == 2
    assert len(runs(actor="alice")) == 3 and runs(actor="fran") == []
    assert runs(thread=history["waiting"].thread_id) == [history["waiting"].pk]
    assert runs(agent="nobody") == []
    assert (
        b"No runs match these filters"
        in client.get(reverse("console:runs"), {"agent": "x"}).content
    )


def test_an_unknown_status_filter_is_ignored_not_an_error(login, history):
    response = login("otto").get(reverse("console:runs"), {"status": "bogus"})
    assert response.status_code == 200 and len(response.context["results"].rows) == 3


def test_the_runs_list_pages(login, history, settings):
    settings.AIRLOCK_CONSOLE = {"PAGE_SIZE": 2}
    client = login("otto")
    completed = client.get(reverse("console:runs"), {"status": "completed"}).context["results"]
    assert len(completed.rows) == 2 and completed.next_cursor is None  # filtered, then paged
    first = client.get(reverse("console:runs"))
    assert len(first.context["results"].rows) == 2 and b"Older" in first.content
    older = first.context["next_query"]
    second = client.get(f"{reverse('console:runs')}?{older}")
    rows = [r.pk for r in first.context["results"].rows + second.context["results"].rows]
    assert rows == [history[k].pk for k in ("waiting", "rejected", "approved")]
    assert second.context["results"].next_cursor is None and b"Newest" in second.content


def test_a_cursor_the_console_never_gave_out_is_400_not_500(login, history):
    client = login("otto")
    for name in ("runs", "audit", "deliveries", "inbox"):
        assert client.get(reverse(f"console:{name}"), {"cursor": "nope"}).status_code == 400
    call = ToolCall.objects.get(run=history["waiting"])
    row = reverse("console:call_row", args=[call.pk])
    assert client.get(row, {"show": "others", "sort": "nope"}).status_code == 400


def test_a_run_page_shows_transcript_steps_calls_and_stream(login, history):
    run = history["approved"]
    response = login("otto").get(reverse("console:run", args=[run.pk]))
    html = response.content.decode()
    assert "/call issue_refund" in html  # the user's message
    assert "issue_refund</code> returned" in html  # the tool result in the transcript
    assert "llm:0" in html and "llm:1" in html and "tool:" in html  # the step timeline
    assert "fran" in html and "via console" in html  # the approval record
    assert "approval-requested" in html and "finish" in html  # the stream's frames
    assert "Decision attempts (1)" in html
    assert response.context["last_seq"] == run.frames.count()


def test_a_waiting_run_links_to_its_card(login, history):
    run = history["waiting"]
    call = ToolCall.objects.get(run=run)
    client = login("otto")
    html = client.get(reverse("console:run", args=[run.pk])).content.decode()
    link = reverse("console:call", args=[call.pk])
    # The call's own page, not the inbox's #card-<id>: rows carry no such anchor (issue 42).
    assert f'href="{link}" data-decide' in html and "waiting" in html
    assert f'id="card-{call.pk}"' in client.get(link).content.decode()


def test_the_run_fragment_is_the_details_alone(login, history):
    run = history["waiting"]
    response = login("otto").get(reverse("console:run_fragment", args=[run.pk]))
    assert response.status_code == 200 and b"<nav" not in response.content
    assert "X-Console-Counts" in response


def test_an_unknown_run_is_not_found(login, db):
    assert login("otto").get(reverse("console:run", args=["run_nope"])).status_code == 404


def test_the_audit_lists_and_filters_every_attempt(login, history, people):
    client = login("otto")
    port_refusal = ToolCall.objects.get(run=history["waiting"])
    with pytest.raises(Exception):  # noqa: B017 (NotApprover, audited)
        port.approve(port_refusal.pk, actor=actor(people["otto"]))
    rows = lambda **q: list(client.get(reverse("console:audit"), q).context["results"].rows)  # noqa: E731
    assert len(rows()) == 3
    assert [a.outcome for a in rows(outcome="not_approver")] == ["not_approver"]
    assert [a.action for a in rows(action="reject")] == ["reject"]
    assert len(rows(actor="fran")) == 2 and len(rows(via="console")) == 1
    assert [a.tool_call_id for a in rows(call=port_refusal.pk)] == [port_refusal.pk]


def test_the_audit_exports_the_filtered_rows_as_csv(login, history):
    response = login("otto").get(reverse("console:audit_csv"), {"actor": "fran"})
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [(r["actor"], r["action"], r["outcome"]) for r in rows] == [
        ("fran", "reject", "applied"),
        ("fran", "approve", "applied"),
    ]
    assert rows[1]["via"] == "console" and rows[0]["tool_name"] == "issue_refund"


def test_the_audit_csv_neutralizes_cells_a_spreadsheet_would_run(login, history):
    """Issue #35: a reject reason ``=HYPERLINK(…)`` started a cell of the export (OWASP: prefix
    ``'`` to a cell starting with = + - @ tab or CR)."""
    typed = ['=HYPERLINK("https://evil.example","x")', "+1", "-2", "@SUM(A1)", "\tx", "\rx"]
    for detail in typed:
        DecisionAttempt.objects.create(
            tool_call_id="tc_x", action="reject", actor_ref="=cmd|' /C calc'!A0", via="api",
            outcome="applied", detail=detail,
        )  # fmt: skip
    response = login("otto").get(reverse("console:audit_csv"), {"call": "tc_x"})
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert sorted(r["detail"] for r in rows) == sorted(f"'{d}" for d in typed)
    assert {r["actor_ref"] for r in rows} == {"'=cmd|' /C calc'!A0"}


def test_the_audit_pages_but_its_csv_export_is_every_row(login, history, settings):
    settings.AIRLOCK_CONSOLE = {"PAGE_SIZE": 1}
    client = login("otto")
    first = client.get(reverse("console:audit"), {"actor": "fran"})
    assert len(first.context["results"].rows) == 1 and b"Older" in first.content
    second = client.get(f"{reverse('console:audit')}?{first.context['next_query']}")
    assert [a.action for a in second.context["results"].rows] == ["approve"]
    assert 'href="/console/audit.csv?actor=fran"' in second.content.decode()  # no cursor
    export = client.get(reverse("console:audit_csv"), {"actor": "fran", "cursor": "ignored"})
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert [r["action"] for r in rows] == ["reject", "approve"]


def test_the_metrics_count_runs_rates_and_latency(login, history):
    analytics.refresh_due()  # the sweep's snapshot of the approvals' numbers
    response = login("otto").get(reverse("console:metrics"))
    m = response.context["m"]
    assert m.totals == {RunStatus.COMPLETED: 2, RunStatus.WAITING: 1}
    assert m.failure_rate == 0.0
    assert m.decisions == 2 and m.latency_median is not None and m.latency_p95 is not None
    [refunds] = m.tools
    assert (refunds.tool, refunds.asked, refunds.settled, refunds.rejected) == (
        "issue_refund",
        3,
        2,
        1,
    )
    assert refunds.rejection_rate == 0.5 and refunds.expiry_rate == 0.0
    html = response.content.decode()
    assert "<svg" in html and "50.0%" in html and "0.0%" in html


def test_metrics_with_no_runs_say_so(login, db):
    response = login("otto").get(reverse("console:metrics"))
    assert response.context["m"].failure_rate is None
    assert b"Not computed yet" in response.content  # before the sweep's first snapshot
    analytics.refresh_due()
    response = login("otto").get(reverse("console:metrics"))
    assert b"No approval was asked in this period" in response.content


def test_pages_and_fragments_are_compressed_for_clients_that_accept_it(login, history):
    client = login("otto")
    # The fragment of a list with rows: Django leaves bodies under 200 bytes as they are.
    for url in (reverse("console:inbox"), reverse("console:inbox_fragment") + "?show=others"):
        response = client.get(url, HTTP_ACCEPT_ENCODING="gzip, deflate, br")
        assert response.status_code == 200 and response["Content-Encoding"] == "gzip", url
    assert "Content-Encoding" not in client.get(reverse("console:inbox"))
