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
from decimal import ROUND_HALF_EVEN, Decimal
from functools import cached_property
from typing import Any, Literal, TypeAlias

import pydantic

from .actors import Actor

logger = logging.getLogger(__name__)

Kind: TypeAlias = Literal["read", "action", "human"]
ApprovalScope: TypeAlias = Literal["call", "attempt"]
# "blocking": the run waits for the decision; "independent": the call becomes a proposal, the
# run goes on, and a decision executes it apart (SPEC §17).
ApprovalMode: TypeAlias = Literal["blocking", "independent"]


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
    # The token of the driver's lease: it grows with every driver that takes the run over, so a
    # target that keeps the highest token it has seen can refuse a stalled driver's late write
    # (a fencing token). ``None`` outside a driver (a preflight, a summary).
    lease_token: int | None = None


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
# Raises ValueError saying why a decider may not approve the edited args in place of the original.
EditValidatorFn: TypeAlias = Callable[[ToolContext, dict[str, Any], dict[str, Any]], None]
ReplacementKey: TypeAlias = str | Callable[[dict[str, Any]], str]
# A call's amount (a refund's sum), for the decider: a column, a sort, totals. None: no amount.
AmountFn: TypeAlias = Callable[[dict[str, Any]], Decimal | float | None]
# Amounts are stored to the cent (``ToolCall.amount``).
CENT = Decimal("0.01")
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
    # Without ``summary``: that line as a ``str.format`` template over the call's args.
    confirmation: str = ""
    atomic: bool = False
    idempotent: bool = False
    approval_scope: ApprovalScope = "call"
    rememberable: bool = True
    queue: str | None = None  # the Celery queue its steps run on (None: see ``queue_of``)
    prompt: str = ""  # human tools: the question shown to the user
    answer_model: type[pydantic.BaseModel] | None = None  # human tools: the answer's schema
    delegate: str = ""  # delegation tools (SPEC §14): the agent the call starts a child run of
    detached: bool = False  # delegation tools: return the child's run id at once
    editable: tuple[str, ...] | None = None  # the args a decider may edit (None: any of them)
    validate_edit: EditValidatorFn | None = None  # bounds an edit (a refund within its order)
    approval_mode: ApprovalMode | None = None  # None: the agent's
    # Independent proposals: a newer pending one with the same key supersedes older ones.
    replacement_key: ReplacementKey | None = None
    # "token": called with no approval channel, a first call previews and answers a signed
    # single-use confirm_token; the same arguments with it commit (SPEC §17, ``confirmed``).
    confirm: Literal["token"] | None = None
    # Tools of an MCP server (SPEC §18): its input schema, its annotations (handed to the policy:
    # ``readOnlyHint``, ``destructiveHint``, ``idempotentHint``, ``openWorldHint``), its source.
    input_schema: dict[str, Any] | None = field(default=None, compare=False)
    annotations: dict[str, Any] = field(default_factory=dict, compare=False)
    source: str = ""  # "mcp:<server>"; "" for a tool declared in Python
    amount: AmountFn | None = None  # a call's numeric amount (a refund's sum)
    related_by: tuple[str, ...] = ()  # calls of this tool with these args equal are related

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

    def answer_defaults(self) -> Any:
        """A human tool's answer made of its schema's defaults (``None`` when a field has none):
        what a skipped question is recorded with."""
        assert self.answer_model is not None, f"{self.name} is not a human tool"
        try:
            return self.answer_model().model_dump(mode="json")
        except pydantic.ValidationError:
            return None

    def validate_answer(self, answer: Any) -> Any:
        """A human tool's validated answer; raises ``pydantic.ValidationError``."""
        assert self.answer_model is not None, f"{self.name} is not a human tool"
        return self.answer_model.model_validate(answer).model_dump(mode="json")

    def check_edit(
        self, ctx: ToolContext, original: dict[str, Any], edited: dict[str, Any]
    ) -> None:
        """Raise ``ValueError`` saying why a decider may not approve ``edited`` (valid args) in
        place of the call's ``original`` args: a field outside ``editable``, or the tool's own
        ``validate_edit``."""
        if self.editable is not None:
            fixed = sorted(
                k
                for k in (original.keys() | edited.keys()) - set(self.editable)
                if original.get(k) != edited.get(k)
            )
            if fixed:
                allowed = ", ".join(self.editable) or "none"
                raise ValueError(f"{', '.join(fixed)} may not be edited (editable: {allowed})")
        if self.validate_edit is not None:
            self.validate_edit(ctx, original, edited)

    def replacement_key_of(self, args: dict[str, Any]) -> str:
        """This call's replacement key ("" without one)."""
        key = self.replacement_key
        if key is None:
            return ""
        return key if isinstance(key, str) else str(key(args))

    def amount_of(self, args: dict[str, Any]) -> Decimal | None:
        """The call's amount to the cent (``None`` without ``amount``, or when it raised or gave
        no number: like a summary, a broken amount never stops a run)."""
        if self.amount is None:
            return None
        try:
            value = self.amount(args)
            if value is None:
                return None
            return Decimal(str(value)).quantize(CENT, rounding=ROUND_HALF_EVEN)
        except Exception:
            logger.exception("the amount of tool %s failed", self.name)
            return None

    def related_args(self, args: dict[str, Any]) -> dict[str, Any]:
        """The args ``related_by`` names, as a call's related calls must share them (``{}``: the
        tool declares no relation, or the call lacks one of them)."""
        shared = {k: args[k] for k in self.related_by if k in args}
        return shared if len(shared) == len(self.related_by) else {}

    def summarize(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        """The call's one-line summary ("" without ``summary``, or when it raised: the decider
        then reads the raw arguments, and a broken summary never stops a run)."""
        if self.summary is None and not self.confirmation:
            return ""
        try:
            said = self.summary(ctx, args) if self.summary else self.confirmation.format(**args)
            text = " ".join(str(said).split())
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
    confirmation: str = "",
    atomic: bool = False,
    idempotent: bool = False,
    approval_scope: ApprovalScope = "call",
    rememberable: bool = True,
    queue: str | None = None,
    editable: tuple[str, ...] | None = None,
    validate_edit: EditValidatorFn | None = None,
    approval_mode: ApprovalMode | None = None,
    replacement_key: ReplacementKey | None = None,
    confirm: Literal["token"] | None = None,
    amount: AmountFn | None = None,
    related_by: tuple[str, ...] = (),
) -> Any:
    """Declare a tool: ``@tool`` or ``@tool(kind="action", atomic=True, ...)``.

    The function takes ``ctx: ToolContext`` first, then its typed arguments. ``queue`` names
    the Celery queue the durable runner runs it on (e.g. only workers holding its credentials
    listen there); by default see ``agent_core.runner.queues.queue_of``. ``summary(ctx, args)``
    returns one human line about a call ("Refund 120.00 on order A-1003 — Jane Doe"), computed
    when the call asks for approval and stored with it. ``editable`` names the args a decider
    may change before approving (default: any), and ``validate_edit(ctx, original, edited)``
    raises ``ValueError`` for an edit the tool refuses (a refund above its order's total).
    ``confirmation``, a template over the args (``"Refund {amount} on order {order_id}"``),
    says what ``summary`` says, listed by ``GET /agent/tools``.
    ``approval_mode="independent"`` (an action): a call is a proposal that
    waits for its decision apart from the run (SPEC §17); ``replacement_key`` (a string, or a
    function of the args) makes a newer pending proposal supersede older ones of the same key.
    ``confirm="token"``: callable through ``agent_core.toolcalls.confirmed.call`` by clients with no
    approval channel: preview first, then commit with the signed token.
    ``amount(args)`` gives a call's number (a refund's sum: the inbox's amount column, its sort
    and the bulk dialog's total), stored with the call when it asks for approval.
    ``related_by`` names args ("order_id",): the card of a call lists the other calls of the
    tool with the same values (pending or decided), with their amounts and their sum.
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
            confirmation=confirmation,
            atomic=atomic,
            idempotent=idempotent,
            approval_scope=approval_scope,
            rememberable=rememberable,
            queue=queue,
            editable=editable,
            validate_edit=validate_edit,
            approval_mode=approval_mode,
            replacement_key=replacement_key,
            confirm=confirm,
            amount=amount,
            related_by=related_by,
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
