"""A notice as a Slack message: ``text`` for notifications, ``blocks`` for the message itself.

The shape of Slack's Block Kit (``section``, ``context``, ``actions`` with URL buttons), accepted
by an incoming webhook or by a bot that relays the payload to ``chat.postMessage``.
"""

from __future__ import annotations

import json
from typing import Any

from .notice import Notice

_MAX_ARGS = 2500  # a section's text is capped at 3000 characters


def blocks(notice: Notice) -> dict[str, Any]:
    """The Slack payload of ``notice``."""
    args = json.dumps(notice.args, indent=2, ensure_ascii=False)
    if len(args) > _MAX_ARGS:
        args = args[:_MAX_ARGS] + "\n…"
    summary = f"*{_escape(notice.headline)}*"
    if notice.confirmation:
        summary += f"\n{_escape(notice.confirmation)}"
    context = f"Requested by {_escape(notice.requester_ref)} · run {notice.run_id}"
    if notice.expires_at:
        context += f" · expires {notice.expires_at:%Y-%m-%d %H:%M %Z}"
    payload: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": summary}},
        {"type": "section", "text": {"type": "mrkdwn", "text": f"```{_escape(args)}```"}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": context}]},
    ]
    buttons = [
        _button("Approve", notice.links.get("approve"), "primary"),
        _button("Reject", notice.links.get("reject"), "danger"),
        _button("Answer", notice.links.get("answer"), "primary"),
        _button("Open the inbox", notice.inbox_url, None),
    ]
    elements = [b for b in buttons if b is not None]
    if elements:
        payload.append({"type": "actions", "elements": elements})
    return {"text": notice.headline, "blocks": payload}


def _button(label: str, url: str | None, style: str | None) -> dict[str, Any] | None:
    if not url:
        return None
    button: dict[str, Any] = {
        "type": "button",
        "text": {"type": "plain_text", "text": label},
        "url": url,
    }
    if style:
        button["style"] = style
    return button


def _escape(text: str) -> str:
    # Slack's mrkdwn reserves these three characters.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
