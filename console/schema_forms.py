"""A Django form generated from a JSON schema: the form of a human tool's answer.

Plain fields for strings (a choice for an ``enum``), integers, numbers and booleans; any other
property is a JSON text field. The answer is validated again, against the schema itself, by the
approval port: this form only makes it easy to type.
"""

from __future__ import annotations

from typing import Any

from django import forms

from .forms import parse_json


def form_class_for(schema: dict[str, Any]) -> type[forms.Form]:
    """A form class with one field per property of an object schema, in the schema's order."""
    required = set(schema.get("required", ()))
    fields: dict[str, forms.Field] = {
        name: _field(prop, required=name in required)
        for name, prop in schema.get("properties", {}).items()
    }
    return type("AnswerForm", (forms.Form,), fields)


def _field(prop: dict[str, Any], *, required: bool) -> forms.Field:
    prop = _without_null(prop)
    common: dict[str, Any] = {
        "required": required,
        "label": prop.get("title"),
        "help_text": prop.get("description", ""),
        "initial": prop.get("default"),
    }
    kind = prop.get("type")
    if "enum" in prop:
        choices = [(v, str(v)) for v in prop["enum"]]
        return forms.TypedChoiceField(choices=choices, coerce=_enum_coercer(prop["enum"]), **common)
    if kind == "string":
        long = prop.get("maxLength", 1000) > 200
        widget = forms.Textarea(attrs={"rows": 3}) if long else forms.TextInput
        return forms.CharField(
            min_length=prop.get("minLength"),
            max_length=prop.get("maxLength"),
            widget=widget,
            **common,
        )
    if kind == "integer":
        return forms.IntegerField(
            min_value=prop.get("minimum"), max_value=prop.get("maximum"), **common
        )
    if kind == "number":
        return forms.FloatField(
            min_value=prop.get("minimum"), max_value=prop.get("maximum"), **common
        )
    if kind == "boolean":
        return forms.BooleanField(**{**common, "required": False})
    return JSONValueField(**common)


def _without_null(prop: dict[str, Any]) -> dict[str, Any]:
    # pydantic writes ``X | None`` as anyOf [X, {"type": "null"}]: the field is X, optional.
    options = [p for p in prop.get("anyOf", ()) if p.get("type") != "null"]
    if len(options) == 1:
        return {**prop, **options[0]}
    return prop


def _enum_coercer(values: list[Any]) -> Any:
    by_text = {str(v): v for v in values}
    return lambda text: by_text[text]


class JSONValueField(forms.CharField):
    """Any JSON value, typed as text."""

    widget = forms.Textarea(attrs={"rows": 3})

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value)
        if text in ("", None):
            return None
        return parse_json(text)
