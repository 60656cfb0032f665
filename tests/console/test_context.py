"""Decisions with context: a card shows what the user asked, what the model said, the transcript."""

from __future__ import annotations

from django.urls import reverse
from django.utils.html import escape

from agent_core.models import Message
from tests.console.conftest import REFUND, card_html


def test_a_card_shows_the_users_last_message_and_links_the_transcript(login, refund):
    Message.objects.filter(pk=refund.message_id).update(
        content=[{"type": "text", "text": "Refunding the damaged parcel."}, *refund.message.content]
    )
    html = card_html(login("fran"), refund)
    context = html[html.index("data-context") :].split("</div>")[0]
    assert "alice asked" in context and escape(REFUND) in context
    assert "The model said" in context and "Refunding the damaged parcel." in context
    assert reverse("console:run", args=[refund.run_id]) + "#transcript-h" in context
