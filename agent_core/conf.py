"""The ``AGENT`` settings dict: typed defaults, dotted paths imported lazily."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Literal

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver


@dataclass(frozen=True, kw_only=True)
class VendorSettings:
    """How to reach one model vendor (``AGENT["OPENAI"]``, ``AGENT["ANTHROPIC"]``).

    ``BASE_URL`` and ``API_KEY`` left ``None`` fall back to the vendor's environment variables
    (``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``, ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY``).
    """

    BASE_URL: str | None = None  # the vendor's API root; None: its environment variable
    API_KEY: str | None = None  # None: the vendor's environment variable
    TIMEOUT: float = 60.0  # seconds; connect and each read of the stream
    MAX_TOKENS: int = 4096  # output tokens per model step (Anthropic requires a limit)


DEFAULT_THROTTLE_RATES: dict[str, str | None] = {"chat": "60/min", "decision": "300/min"}


@dataclass(frozen=True, kw_only=True)
class QuotaLimits:
    """Limits on what one actor may start (``AGENT["QUOTAS"]``); ``None``: no limit."""

    RUNS_PER_MINUTE: int | None = None  # runs started in the last 60 s
    CONCURRENT_RUNS: int | None = None  # runs active at once
    TOKENS_PER_DAY: int | None = None  # model input + output tokens in the last 24 h


@dataclass(frozen=True, kw_only=True)
class QuotaSettings(QuotaLimits):
    """Per-actor limits over all agents, and ``PER_AGENT``: per-actor limits on one agent."""

    PER_AGENT: dict[str, QuotaLimits] = field(default_factory=dict)  # agent name -> its limits

    def __post_init__(self) -> None:
        limits = {
            name: v if isinstance(v, QuotaLimits) else QuotaLimits(**v)
            for name, v in self.PER_AGENT.items()
        }
        object.__setattr__(self, "PER_AGENT", limits)


@dataclass(frozen=True, kw_only=True)
class AgentSettings:
    """Every key of ``settings.AGENT`` with its default; an unknown key is a TypeError."""

    # Which runner drives runs: threads of the web process, or Celery workers (SPEC §12).
    RUNNER: Literal["inline", "durable"] = "inline"
    MODEL: str = "scripted:demo"  # the model of agents that name none ("vendor:model")
    AGENTS: tuple[str, ...] = ()  # dotted paths of the Agent objects
    # Model vendor prefix (the "vendor" of "vendor:model") -> dotted path of its provider class.
    PROVIDERS: dict[str, str] = field(
        default_factory=lambda: {
            "scripted": "agent_core.providers.scripted.ScriptedProvider",
            "openai": "agent_core.providers.openai.OpenAIProvider",
            "anthropic": "agent_core.providers.anthropic.AnthropicProvider",
        }
    )
    # None: the gate an installed app declares (approvals'), else agent_core.gate.RefuseActions.
    APPROVAL_GATE: str | None = None
    # Read by the approval app; None: its default (approvals.policy.DefaultPolicy).
    APPROVAL_POLICY: str | None = None
    ACTOR_RESOLVER: str = "agent_core.actors.DjangoAuthResolver"  # request -> Actor(ref, roles)
    MAX_TOOL_CALLS_PER_STEP: int = 16  # the calls of one model reply past this are refused
    # Per run (agent_core.runner.limits; an Agent may set its own): past one, the run fails.
    MAX_STEPS_PER_RUN: int = 20  # model steps
    MAX_TOOL_CALLS_PER_RUN: int = 100  # calls the model proposed
    TOOL_LOOP_LIMIT: int = 5  # the same call (tool and canonical args) this many times in a row
    MAX_DELEGATION_DEPTH: int = 3  # child runs below a run a person started (SPEC §14)
    # Per-actor DRF throttles (agent_core.api.throttles): scope -> "N/s|min|hour|day" or None.
    THROTTLE_RATES: dict[str, str | None] = field(default_factory=dict)
    LEASE_SECONDS: int = 30  # a driver's lease; a dead driver's run is re-driven after it
    SWEEP_SECONDS: int = 5  # how often the sweeper runs
    # Every connection's PostgreSQL lock_timeout and idle_in_transaction_session_timeout
    # (agent_core.engine.sessions): how long a stalled process may hold a row lock up. An atomic
    # tool
    # must finish inside the second.
    LOCK_TIMEOUT_SECONDS: float = 5.0  # the longest a statement waits for a row lock
    IDLE_IN_TRANSACTION_SECONDS: float = 60.0  # the longest a transaction may sit idle
    INLINE_WORKERS: int = 8  # the inline runner's threads (0: drive in the calling thread)
    MODEL_STEP_ATTEMPTS: int = 3  # tries of a model step on retryable errors, with backoff
    # The durable runner (SPEC §12): where steps run, and how long one task drives a run.
    MODEL_QUEUE: str = "agent.llm"  # model steps, and read / atomic / human tools by default
    TOOL_QUEUE: str = "agent.tool"  # action tools with effects outside the database by default
    CHAIN_MAX_STEPS: int = 16  # steps one task takes before it hands the run on (fairness)
    CHAIN_MAX_SECONDS: float = 10.0  # nor does it start another step after this long
    # Model text is gathered into one frame until this long has passed or this much is held.
    STREAM_FRAME_FLUSH_MS: int = 50
    STREAM_FRAME_FLUSH_BYTES: int = 1024  # bytes of held model text that flush a frame at once
    EXPOSE_ERROR_DETAILS: bool | None = None  # None: follow settings.DEBUG
    # The REST API and streams (agent_core.api, agent_core.streams.live).
    ALLOW_HEADER_ACTOR: bool = False  # let the header resolver run with DEBUG off
    OPERATOR_ROLE: str = "operator"  # actors with this role see and may cancel every run
    STREAM_KEEPALIVE_SECONDS: float = 15.0  # a keep-alive comment on a quiet stream this often
    # Streams (SSE, UI message stream, the run's WebSocket) one actor follows at once, per
    # process (agent_core.streams.stream_slots); past it, 429 too_many_streams.
    MAX_STREAMS_PER_ACTOR: int = 50
    MAX_BODY_BYTES: int = 65536  # larger API request bodies are refused with 413
    CANCEL_POLL_MS: int = 200  # how often a driver's abort signal looks for a cancel request
    # Confirmed tools (SPEC §17): how long a preview's confirm_token may commit its call.
    CONFIRM_TOKEN_SECONDS: int = 300
    # The DRF classes of every API view (agent_core.api.base), whatever REST_FRAMEWORK says.
    API_AUTHENTICATION_CLASSES: tuple[str, ...] = (
        "rest_framework.authentication.SessionAuthentication",
        "agent_core.api.auth.TokenAuthentication",  # DRF's, in one query with the roles
    )
    API_PERMISSION_CLASSES: tuple[str, ...] = ("agent_core.api.actors.HasActor",)  # DRF permissions
    # JSON only; add "rest_framework.renderers.BrowsableAPIRenderer" to opt in to DRF's HTML pages.
    API_RENDERER_CLASSES: tuple[str, ...] = ("rest_framework.renderers.JSONRenderer",)
    API_SCHEMA_CLASS: str = "agent_core.api.openapi.AutoSchema"  # their schema inspector
    API_EXCEPTION_HANDLER: str = "agent_core.api.errors.exception_handler"  # {code, detail}
    TRACING: bool = False  # OpenTelemetry spans (agent_core.tracing; the ``otel`` extra)
    OPENAI: VendorSettings = field(default_factory=VendorSettings)  # how to reach OpenAI
    ANTHROPIC: VendorSettings = field(default_factory=VendorSettings)  # and Anthropic
    # Conversation control (agent_core.conversation.idempotency, agent_core.quotas).
    IDEMPOTENCY_KEY_TTL: int = 86400  # seconds a key replays its first answer
    QUOTAS: QuotaSettings = field(default_factory=QuotaSettings)  # per-actor limits
    # Dotted path of the class that applies the quotas (the default reads QUOTAS).
    QUOTA_POLICY: str = "agent_core.quotas.SettingsQuotaPolicy"
    # Messages one thread's queue holds (``mode: queue | interrupt``); past it, 429 queue_full.
    MAX_QUEUED_TURNS: int = 10
    # MCP servers agents take tools from (SPEC §18): name -> options (agent_core.mcp.servers).
    MCP_SERVERS: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key in (
            "AGENTS",
            "API_AUTHENTICATION_CLASSES",
            "API_PERMISSION_CLASSES",
            "API_RENDERER_CLASSES",
        ):
            object.__setattr__(self, key, tuple(getattr(self, key)))
        # A project that sets one rate keeps the defaults of the others.
        object.__setattr__(
            self, "THROTTLE_RATES", {**DEFAULT_THROTTLE_RATES, **self.THROTTLE_RATES}
        )
        for vendor in ("OPENAI", "ANTHROPIC"):
            value = getattr(self, vendor)
            if isinstance(value, dict):  # settings give a dict; an unknown key is a TypeError
                object.__setattr__(self, vendor, VendorSettings(**value))
        if isinstance(self.QUOTAS, dict):
            object.__setattr__(self, "QUOTAS", QuotaSettings(**self.QUOTAS))

    @property
    def expose_error_details(self) -> bool:
        if self.EXPOSE_ERROR_DETAILS is None:
            return bool(settings.DEBUG)
        return self.EXPOSE_ERROR_DETAILS


@functools.cache
def agent_settings() -> AgentSettings:
    """The current ``AGENT`` settings, parsed once and cached until the setting changes."""
    raw: dict[str, Any] = dict(getattr(settings, "AGENT", {}))
    return AgentSettings(**raw)


@receiver(setting_changed)
def _reload(*, setting: str, **kwargs: Any) -> None:
    # override_settings(AGENT=...) in tests must be seen by the next call.
    if setting == "AGENT":
        agent_settings.cache_clear()
