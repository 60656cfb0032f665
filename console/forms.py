"""The console's forms: decisions, in-doubt resolutions and bulk selections (its list filters are
``console.filters``)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django import forms

from agent_core.engine import jsonsafe
from agent_core.ids import is_id
from approvals import grants


def parse_json(text: str) -> Any:
    """JSON typed into a form, refused like an API body when it cannot be stored."""
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise forms.ValidationError(f"This is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise forms.ValidationError("This JSON is nested too deeply.") from exc
    unstorable = jsonsafe.problem(parsed)
    if unstorable is not None:
        raise forms.ValidationError(f"This JSON cannot be stored: {unstorable}.")
    return parsed


class JSONObjectField(forms.CharField):
    """A JSON object typed into a text area."""

    widget = forms.Textarea(attrs={"rows": 6, "spellcheck": "false"})

    def to_python(self, value: Any) -> Any:
        parsed = parse_json(super().to_python(value) or "")
        if not isinstance(parsed, dict):
            raise forms.ValidationError('Give a JSON object: {"name": value, …}.')
        return parsed


class ApproveForm(forms.Form):
    """Approve, optionally remembering the approval for this tool in this thread."""

    remember = forms.BooleanField(required=False)


class RememberForm(forms.Form):
    """Approve and remember for the later calls the scope covers: pins pre-filled with the
    call's own args (remove a field to let it vary, or make a string a glob), uses, ttl."""

    pins = JSONObjectField(
        label="Only for calls whose args match (JSON; a string may be a glob: /products/*)",
        required=False,
    )
    uses = forms.IntegerField(
        required=False, min_value=1, max_value=grants.MAX_USES, label="At most this many calls"
    )
    ttl = forms.IntegerField(
        required=False, min_value=1, max_value=grants.MAX_TTL_SECONDS, label="For (seconds)"
    )

    def scope(self) -> grants.Scope:
        """The scope asked for (the form must be valid)."""
        data = self.cleaned_data
        return grants.Scope(
            args=data.get("pins") or {},
            uses=data.get("uses"),
            ttl=timedelta(seconds=data["ttl"]) if data.get("ttl") else None,
        )


class RejectForm(forms.Form):
    """Reject with a reason; the model is told it."""

    reason = forms.CharField(max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))


class EditArgsForm(forms.Form):
    """Approve with edited arguments; the approval port validates them against the schema."""

    args = JSONObjectField(label="Arguments")


class ExtendForm(forms.Form):
    """Push a pending request's deadline back by a fixed step, counted from its deadline."""

    STEPS = {"15m": timedelta(minutes=15), "1h": timedelta(hours=1), "1d": timedelta(days=1)}
    by = forms.ChoiceField(
        choices=[("15m", "+15 min"), ("1h", "+1 hour"), ("1d", "+1 day")], label="Extend by"
    )

    @property
    def step(self) -> timedelta:
        """The chosen step (the form must be valid)."""
        return self.STEPS[self.cleaned_data["by"]]


class JSONResultField(forms.CharField):
    """The result a person records for a call marked done (any JSON; empty is ``null``)."""

    widget = forms.Textarea(attrs={"rows": 3, "spellcheck": "false"})

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value)
        if not text:
            return None
        return parse_json(text)


class MarkDoneForm(forms.Form):
    """Mark an in-doubt call done: it happened; ``result`` is what the model will be told."""

    result = JSONResultField(required=False, label="Result (JSON)")


class BulkForm(forms.Form):
    """Approve or reject several calls of one tool; ``confirm`` is the second step (the first
    shows the list to confirm)."""

    MAX_CALLS = 100

    ids = forms.MultipleChoiceField(choices=(), error_messages={"required": "Select some calls."})
    action = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    reason = forms.CharField(
        required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2})
    )
    confirm = forms.BooleanField(required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Any id is a choice here: the view finds the calls and the port judges each one.
        given = self.data.getlist("ids") if hasattr(self.data, "getlist") else []
        ids_field = self.fields["ids"]
        assert isinstance(ids_field, forms.MultipleChoiceField)
        ids_field.choices = [(i, i) for i in given]

    def clean_ids(self) -> list[str]:
        ids: list[str] = list(dict.fromkeys(self.cleaned_data["ids"]))
        if len(ids) > self.MAX_CALLS:
            raise forms.ValidationError(f"At most {self.MAX_CALLS} calls at once.")
        # Checked before any query sees them: a NUL or a 5,000-character id is a 400, not a
        # database error.
        if any(not is_id(i) for i in ids):
            raise forms.ValidationError("Select calls by their ids (tc_…).")
        return ids

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("action") == "reject" and not data.get("reason"):
            self.add_error("reason", "Give the reason the agent is told.")
        return data
