""" "Fork from here" on the run page (SPEC §16): a POST form with CSRF, shown to whoever may see
the thread; the fork is the viewer's, holds the calls that had ended, and repeats no effect."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from agent_core.models import Message, Thread, ToolCall
from approvals import services as port
from demo.models import Refund
from tests.console.conftest import actor
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def _fork(client, run_id: str, message_id: str):
    return client.post(reverse("console:fork_run", args=[run_id]), {"message_id": message_id})


def test_an_approver_forks_after_the_refund_ran_and_it_runs_no_more(refund, login, people, decide):
    decide(port.approve, refund.pk, actor=actor(people["fran"]))
    assert Refund.objects.count() == 1
    client = login("fran")
    page = client.get(reverse("console:run", args=[refund.run_id])).content.decode()
    assert page.count("Fork from here") == Message.objects.filter(run=refund.run_id).count()
    assert "csrfmiddlewaretoken" in page
    proposing = Message.objects.get(run=refund.run_id, role="assistant", seq=2)
    response = _fork(client, refund.run_id, proposing.pk)
    assert response.status_code == 302
    forked = Thread.objects.exclude(pk=refund.thread_id).get()
    assert forked.owner_ref == actor(people["fran"]).ref
    assert (forked.forked_from_thread_id, forked.forked_from_message_id) == (
        refund.thread_id,
        proposing.pk,
    )
    [copy] = ToolCall.objects.filter(thread=forked)
    assert copy.status == "succeeded" and Refund.objects.count() == 1
    shown = client.get(response["Location"]).content.decode()
    assert f"Forked into thread {forked.pk}" in shown and "Forked from thread" in shown


def test_a_viewer_who_may_not_see_the_thread_gets_no_form_and_404(refund, client):
    stranger = make_user("sam", staff=True)
    client.force_login(stranger)
    said = Message.objects.filter(run=refund.run_id).earliest("seq")
    assert client.get(reverse("console:run", args=[refund.run_id])).status_code == 404
    assert _fork(client, refund.run_id, said.pk).status_code == 404
    assert Thread.objects.count() == 1


def test_a_fork_needs_a_post_with_csrf_and_a_message_of_the_thread(refund, login, people):
    client = login("fran")
    url = reverse("console:fork_run", args=[refund.run_id])
    assert client.get(url).status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(people["fran"])
    said = Message.objects.filter(run=refund.run_id).earliest("seq")
    assert strict.post(url, {"message_id": said.pk}).status_code == 403
    assert _fork(client, refund.run_id, "msg_nope").status_code == 404
    assert Thread.objects.count() == 1
