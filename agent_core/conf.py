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

    BASE_URL: str | None = None
    API_KEY: str | None = None
    TIMEOUT: float = 60.0  # seconds; connect and each read of the stream
    MAX_TOKENS: int = 4096  # output tokens per model step (Anthropic requires a limit)


@dataclass(frozen=True, kw_only=True)
class AgentSettings:
    """Every key of ``settings.AGENT`` with its default; an unknown key is a TypeError."""

    RUNNER: Literal["inline", "durable"] = "inline"
    MODEL: str = "scripted:demo"
    AGENTS: tuple[str, ...] = ()
    PROVIDERS: dict[str, str] = field(
        default_factory=lambda: {
            "scripted": "agent_core.providers.scripted.ScriptedProvider",
            "openai": "agent_core.providers.openai.OpenAIProvider",
            "anthropic": "agent_core.providers.anthropic.AnthropicProvider",
        }
    )
    APPROVAL_GATE: str = "approvals.gate.ApprovalGate"
    APPROVAL_POLICY: str = "approvals.policy.DefaultPolicy"
    ACTOR_RESOLVER: str = "agent_core.actors.DjangoAuthResolver"
    MAX_STEPS: int = 20
    LEASE_SECONDS: int = 30
    SWEEP_SECONDS: int = 5
    INLINE_WORKERS: int = 8
    MODEL_STEP_ATTEMPTS: int = 3
    STREAM_FRAME_FLUSH_MS: int = 50
    STREAM_FRAME_FLUSH_BYTES: int = 1024
    EXPOSE_ERROR_DETAILS: bool | None = None  # None: follow settings.DEBUG
    # The REST API and streams (agent_core.api, agent_core.live).
    ALLOW_HEADER_ACTOR: bool = False  # let the header resolver run with DEBUG off
    OPERATOR_ROLE: str = "operator"  # actors with this role see and may cancel every run
    STREAM_KEEPALIVE_SECONDS: float = 15.0
    MAX_BODY_BYTES: int = 65536  # larger API request bodies are refused with 413
    CANCEL_POLL_MS: int = 200  # how often a driver's abort signal looks for a cancel request
    TRACING: bool = False  # OpenTelemetry spans (agent_core.tracing; the ``otel`` extra)
    OPENAI: VendorSettings = field(default_factory=VendorSettings)
    ANTHROPIC: VendorSettings = field(default_factory=VendorSettings)

    def __post_init__(self) -> None:
        object.__setattr__(self, "AGENTS", tuple(self.AGENTS))
        for vendor in ("OPENAI", "ANTHROPIC"):
            value = getattr(self, vendor)
            if isinstance(value, dict):  # settings give a dict; an unknown key is a TypeError
                object.__setattr__(self, vendor, VendorSettings(**value))

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
