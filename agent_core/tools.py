"""Declaring tools: ``@tool`` turns a typed function into a frozen ``ToolSpec``.

The arguments' JSON schema comes from the type hints (pydantic), the description from the
docstring. ``kind="read"`` runs on the model's say-so; ``kind="action"`` never runs without a
decision; ``human_tool`` asks the user a structured question and the answer becomes the result.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, TypeAlias

import pydantic

from .actors import Actor

logger = logging.getLogger(__name__)

Kind: TypeAlias = Literal["read", "action", "human"]
ApprovalScope: TypeAlias = Literal["call", "attempt"]


class AbortSignal:
    """Set when the run is being cancelled; long tools should check ``is_set()`` and stop."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)


@dataclass(frozen=True)
class ToolContext:
    """What a tool (and its ``preflight`` / ``recover``) knows about the call it serves."""

    run_id: str
    thread_id: str
    tool_call_id: str
    actor: Actor
    idempotency_key: str
    abort_signal: AbortSignal = field(default_factory=AbortSignal)


@dataclass(frozen=True)
class Refuse:
    """Preflight: do not offer this call; the model is told ``reason``."""

    reason: str


@dataclass(frozen=True)
class AlreadyDone:
    """Preflight: the effect already exists; the call succeeds with ``result`` and runs nothing."""

    result: Any = None


@dataclass(frozen=True)
class Confirm:
    """Preflight: go ahead, showing the decider this call's own ``confirmation`` text."""

    confirmation: str


Preflight: TypeAlias = Refuse | AlreadyDone | Confirm | None


@dataclass(frozen=True)
class Recovered:
    """``recover()``'s answer for a call found in doubt: did the side effect happen?"""

    done: bool
    result: Any = None


PreflightFn: TypeAlias = Callable[[ToolContext, dict[str, Any]], Preflight]
RecoverFn: TypeAlias = Callable[[ToolContext, dict[str, Any]], Recovered]
SummaryFn: TypeAlias = Callable[[ToolContext, dict[str, Any]], str]
# A summary is one line on an inbox row: longer text is cut there.
SUMMARY_MAX_CHARS = 300


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """A declared tool: everything the loop, the gate and a provider need to know about it."""

    name: str
    description: str
    kind: Kind
    args_model: type[pydantic.BaseModel]
    func: Callable[..., Any] | None
    preflight: PreflightFn | None = None
    recover: RecoverFn | None = None
    summary: SummaryFn | None = None  # one human line about a call, for the decider
    atomic: bool = False
    idempotent: bool = False
    approval_scope: ApprovalScope = "call"
    rememberable: bool = True
    queue: str | None = None  # the Celery queue its steps run on (None: see ``queue_of``)
    prompt: str = ""  # human tools: the question shown to the user
    answer_model: type[pydantic.BaseModel] | None = None  # human tools: the answer's schema
    delegate: str = ""  # delegation tools (SPEC §14): the agent the call starts a child run of
    detached: bool = False  # delegation tools: return the child's run id at once
    # Tools of an MCP server (SPEC §18): its input schema, its annotations (handed to the policy:
    # ``readOnlyHint``, ``destructiveHint``, ``idempotentHint``, ``openWorldHint``), its source.
    input_schema: dict[str, Any] | None = field(default=None, compare=False)
    annotations: dict[str, Any] = field(default_factory=dict, compare=False)
    source: str = ""  # "mcp:<server>"; "" for a tool declared in Python

    @cached_property
    def parameters_schema(self) -> dict[str, Any]:
        # Built once per tool: every model request carries it.
        if self.input_schema is not None:
            return self.input_schema
        return self.args_model.model_json_schema()

    @property
    def answer_schema(self) -> dict[str, Any] | None:
        return self.answer_model.model_json_schema() if self.answer_model else None

    def validate_args(self, args: Any) -> dict[str, Any]:
        """Validated, JSON-ready arguments; raises ``pydantic.ValidationError``."""
        return self.args_model.model_validate(args).model_dump(mode="json")

    def validate_answer(self, answer: Any) -> Any:
        """A human tool's validated answer; raises ``pydantic.ValidationError``."""
        assert self.answer_model is not None, f"{self.name} is not a human tool"
        return self.answer_model.model_validate(answer).model_dump(mode="json")

    def summarize(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        """The call's one-line summary ("" without ``summary``, or when it raised: the decider
        then reads the raw arguments, and a broken summary never stops a run)."""
        if self.summary is None:
            return ""
        try:
            text = " ".join(str(self.summary(ctx, args)).split())
        except Exception:
            logger.exception("the summary of tool %s failed (%s)", self.name, ctx.tool_call_id)
            return ""
        if len(text) > SUMMARY_MAX_CHARS:
            return text[: SUMMARY_MAX_CHARS - 1] + "…"
        return text

    def __call__(self, ctx: ToolContext, args: dict[str, Any]) -> Any:
        assert self.func is not None, f"{self.name} has no function to call"
        parsed = self.args_model.model_validate(args)
        return to_jsonable(self.func(ctx, **dict(parsed)))


def to_jsonable(value: Any) -> Any:
    """What a tool returned, as JSON-ready data (pydantic models are dumped)."""
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    return _ANY.dump_python(value, mode="json")


# Built once: building a TypeAdapter costs more than the dump it serves.
_ANY: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(Any)


def args_digest(tool_name: str, args: dict[str, Any]) -> str:
    """sha256 of the tool name and the canonical JSON of the args: one approval, one call."""
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{tool_name}\n{canonical}".encode()).hexdigest()


def _args_model(func: Callable[..., Any], name: str) -> type[pydantic.BaseModel]:
    """A pydantic model of ``func``'s parameters after the leading ``ctx``."""
    params = list(inspect.signature(func, eval_str=True).parameters.values())[1:]
    fields: dict[str, Any] = {}
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"tool {name}: *args / **kwargs cannot be described to a model")
        annotation = Any if p.annotation is inspect.Parameter.empty else p.annotation
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[p.name] = (annotation, default)
    model_name = "".join(part.title() for part in name.split("_")) + "Args"
    config = pydantic.ConfigDict(extra="forbid")
    return pydantic.create_model(model_name, __config__=config, **fields)


def tool(
    func: Callable[..., Any] | None = None,
    *,
    kind: Literal["read", "action"] = "read",
    name: str | None = None,
    preflight: PreflightFn | None = None,
    recover: RecoverFn | None = None,
    summary: SummaryFn | None = None,
    atomic: bool = False,
    idempotent: bool = False,
    approval_scope: ApprovalScope = "call",
    rememberable: bool = True,
    queue: str | None = None,
) -> Any:
    """Declare a tool: ``@tool`` or ``@tool(kind="action", atomic=True, ...)``.

    The function takes ``ctx: ToolContext`` first, then its typed arguments. ``queue`` names
    the Celery queue the durable runner runs it on (e.g. only workers holding its credentials
    listen there); by default see ``agent_core.runner.queues.queue_of``. ``summary(ctx, args)``
    returns one human line about a call ("Refund 120.00 on order A-1003 — Jane Doe"), computed
    when the call asks for approval and stored with it.
    """

    def wrap(f: Callable[..., Any]) -> ToolSpec:
        tool_name = name or f.__name__
        return ToolSpec(
            name=tool_name,
            description=inspect.getdoc(f) or tool_name,
            kind=kind,
            args_model=_args_model(f, tool_name),
            func=f,
            preflight=preflight,
            recover=recover,
            summary=summary,
            atomic=atomic,
            idempotent=idempotent,
            approval_scope=approval_scope,
            rememberable=rememberable,
            queue=queue,
        )

    return wrap(func) if func is not None else wrap


class _HumanToolArgs(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    question: str = pydantic.Field(description="The question to ask the user, in plain words.")


def human_tool(
    name: str,
    *,
    description: str,
    answer: type[pydantic.BaseModel],
    prompt: str = "",
) -> ToolSpec:
    """A tool whose result is a person's structured answer (``answer`` is its schema)."""
    return ToolSpec(
        name=name,
        description=description,
        kind="human",
        args_model=_HumanToolArgs,
        func=None,
        prompt=prompt,
        answer_model=answer,
    )
