"""System checks for the ``AGENT`` settings (ids ``agent_core.E001``…)."""

from __future__ import annotations

import importlib.util
import re
from typing import Any

from django.conf import settings as django_settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.utils.module_loading import import_string

from .conf import agent_settings

_DOTTED_PATHS = ("APPROVAL_GATE", "APPROVAL_POLICY", "ACTOR_RESOLVER", "QUOTA_POLICY")


@register()
def check_agent_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        settings = agent_settings()
    except TypeError as exc:
        return [
            Error(
                f"AGENT has an unknown key: {exc}",
                id="agent_core.E001",
                hint="See agent_core/conf.py for the keys AGENT accepts.",
            )
        ]
    errors: list[CheckMessage] = []
    agents: list[Any] = []
    for path in settings.AGENTS:
        try:
            agents.append(import_string(path))
        except ImportError as exc:
            errors.append(
                Error(
                    f"AGENT['AGENTS'] lists {path!r}, which does not import: {exc}",
                    id="agent_core.E002",
                    hint="Give the dotted path of an agent_core.agents.Agent.",
                )
            )
    names = {getattr(agent, "name", None) for agent in agents}
    for agent in agents:
        for delegate in getattr(agent, "delegates", ()):
            if getattr(delegate, "agent", None) not in names:
                errors.append(
                    Warning(
                        f"Agent {agent.name!r} delegates to {delegate.agent!r}, which is not "
                        "in AGENT['AGENTS']: calls of it will be refused (agent_not_found).",
                        id="agent_core.W011",
                        hint="List the delegate's dotted path in AGENT['AGENTS'].",
                    )
                )
    paths: dict[str, str] = {
        key: getattr(settings, key) for key in _DOTTED_PATHS if getattr(settings, key) is not None
    }
    paths.update({f"PROVIDERS.{vendor}": path for vendor, path in settings.PROVIDERS.items()})
    paths.update(
        {f"API_RENDERER_CLASSES[{i}]": p for i, p in enumerate(settings.API_RENDERER_CLASSES)}
    )
    for key, dotted in paths.items():
        try:
            import_string(dotted)
        except ImportError as exc:
            errors.append(
                Error(f"AGENT[{key!r}] = {dotted!r} does not import: {exc}", id="agent_core.E003")
            )
    return errors


@register()
def check_header_actor(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The header resolver trusts whatever a client sends: development only."""
    from .actors import HeaderResolver

    try:
        settings = agent_settings()
        resolver = import_string(settings.ACTOR_RESOLVER)
    except (TypeError, ImportError):
        return []  # reported by check_agent_settings
    trusting = isinstance(resolver, type) and issubclass(resolver, HeaderResolver)
    if trusting and not django_settings.DEBUG and not settings.ALLOW_HEADER_ACTOR:
        return [
            Error(
                "AGENT['ACTOR_RESOLVER'] is the header resolver, which lets any client claim to "
                "be anyone, and DEBUG is off.",
                id="agent_core.E004",
                hint="Use agent_core.actors.DjangoAuthResolver (or your own) in production, or "
                "set AGENT['ALLOW_HEADER_ACTOR'] = True behind a proxy that sets the headers.",
            )
        ]
    return []


PUBSUB_LAYER = "channels_redis.pubsub.RedisPubSubChannelLayer"


@register(deploy=True)
def check_channel_prefix(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Redis pub/sub ignores the database number: two deployments sharing one Redis share its
    channels unless each names its own ``prefix``."""
    layer = getattr(django_settings, "CHANNEL_LAYERS", {}).get("default", {})
    if layer.get("BACKEND") != PUBSUB_LAYER or layer.get("CONFIG", {}).get("prefix"):
        return []
    return [
        Warning(
            "CHANNEL_LAYERS['default'] is Redis pub/sub with the default prefix: another "
            "deployment on the same Redis (whatever its db number) sees this one's frames and "
            "console events, and sends to its streams.",
            id="agent_core.W014",
            hint='Give each deployment its own prefix: "CONFIG": {"hosts": [...], '
            '"prefix": "mysite-production"}.',
        )
    ]


@register()
def check_durable_chain(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The durable runner's queues are named and its slice of steps is bounded."""
    try:
        settings = agent_settings()
    except TypeError:
        return []  # reported by check_agent_settings
    errors: list[CheckMessage] = []
    for key in ("MODEL_QUEUE", "TOOL_QUEUE"):
        value = getattr(settings, key)
        if not isinstance(value, str) or not value.strip():
            errors.append(
                Error(
                    f"AGENT[{key!r}] must name a Celery queue, not {value!r}.",
                    id="agent_core.E010",
                    hint="The defaults: MODEL_QUEUE 'agent.llm', TOOL_QUEUE 'agent.tool'.",
                )
            )
    steps, seconds = settings.CHAIN_MAX_STEPS, settings.CHAIN_MAX_SECONDS
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        errors.append(
            Error(
                f"AGENT['CHAIN_MAX_STEPS'] must be a whole number of at least 1, not {steps!r}.",
                id="agent_core.E011",
                hint="How many steps one durable task takes before it hands the run on.",
            )
        )
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or not seconds > 0:
        errors.append(
            Error(
                f"AGENT['CHAIN_MAX_SECONDS'] must be a positive number, not {seconds!r}.",
                id="agent_core.E011",
                hint="After this long a durable task starts no further step of the run.",
            )
        )
    return errors


@register()
def check_database_engine(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The hot path uses PostgreSQL's SQL (``FOR UPDATE``, ``ON CONFLICT``, ``jsonb``)."""
    engine = django_settings.DATABASES.get("default", {}).get("ENGINE", "")
    if "postgresql" in engine or "postgis" in engine:
        return []
    return [
        Error(
            f"Airlock needs PostgreSQL; the default database's ENGINE is {engine!r}.",
            id="agent_core.E005",
            hint='Set DATABASES["default"]["ENGINE"] = "django.db.backends.postgresql" '
            "(psycopg 3 comes with django-airlock).",
        )
    ]


@register()
def check_channel_layer(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Streams and the console's live updates go through the channel layer."""
    if "default" in getattr(django_settings, "CHANNEL_LAYERS", {}):
        return []
    return [
        Error(
            "CHANNEL_LAYERS has no default layer: the SSE and WebSocket streams would stay empty.",
            id="agent_core.E006",
            hint='CHANNEL_LAYERS = {"default": {"BACKEND": '
            '"channels_redis.pubsub.RedisPubSubChannelLayer", "CONFIG": {"hosts": '
            '[{"address": "redis://…", "socket_timeout": None}]}}}',
        )
    ]


@register()
def check_asgi_helper(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The inline runner's sweeper (expiry, re-driving dead runs) starts in the ASGI helper."""
    try:
        if agent_settings().RUNNER != "inline":
            return []
    except TypeError:
        return []  # agent_core.E001
    from .asgi import AirlockApplication

    path = getattr(django_settings, "ASGI_APPLICATION", None)
    found = "ASGI_APPLICATION is not set"
    if path:
        try:
            application = import_string(path)  # with_airlock has no import-time side effects
        except Exception as exc:  # any error of the project's module: report, do not crash
            found = f"ASGI_APPLICATION = {path!r} does not import: {exc}"
        else:
            if isinstance(application, AirlockApplication):
                return []
            found = f"ASGI_APPLICATION = {path!r} is not built by agent_core.asgi.with_airlock"
    return [
        Warning(
            f"{found}: with the inline runner, approvals would never expire and runs whose "
            "process died would never be re-driven, and WebSockets would have no routes.",
            id="agent_core.W007",
            hint="In asgi.py: application = with_airlock(get_asgi_application()), with "
            "`from agent_core.asgi import with_airlock`, and ASGI_APPLICATION pointing to it.",
        )
    ]


@register()
def check_celery_app(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The durable runner sends its steps through the project's Celery app."""
    try:
        if agent_settings().RUNNER != "durable":
            return []
    except TypeError:
        return []
    from celery import current_app

    app = current_app  # a proxy of the app Celery would send the steps through
    if getattr(app, "airlock", False):
        return []
    if app.main in (None, "default", "__main__"):
        msg = "the durable runner would send its steps to Celery's default app (and broker)"
    else:
        msg = f"the Celery app {app.main!r} is not set up by agent_core.celery.with_airlock"
    return [
        Error(
            f"AGENT['RUNNER'] is 'durable' but {msg}: runs would stay queued.",
            id="agent_core.E008",
            hint="In your Celery module: app = Celery(...); app.config_from_object("
            '"django.conf:settings", namespace="CELERY"); app.autodiscover_tasks(); '
            "with_airlock(app). In your project package's __init__.py: "
            "from .celery import app as celery_app.",
        )
    ]


_RATE = re.compile(r"^[1-9][0-9]*/(s|sec|second|m|min|minute|h|hour|d|day)$")
_PROCESS_LOCAL_CACHES = (
    "django.core.cache.backends.locmem.LocMemCache",
    "django.core.cache.backends.dummy.DummyCache",
)


_CAPS = (
    "MAX_TOOL_CALLS_PER_STEP",
    "MAX_STEPS_PER_RUN",
    "MAX_TOOL_CALLS_PER_RUN",
    "TOOL_LOOP_LIMIT",
    "MAX_QUEUED_TURNS",
    "MAX_STREAMS_PER_ACTOR",
    "CONFIRM_TOKEN_SECONDS",
)


@register()
def check_limits(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The caps and limits (``_CAPS``), the connections' timeouts and ``THROTTLE_RATES`` are well
    formed; the throttles' cache is shared by every process."""
    try:
        settings = agent_settings()
    except TypeError:
        return []  # reported by check_agent_settings
    errors: list[CheckMessage] = []
    for key in _CAPS:
        cap = getattr(settings, key)
        if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
            errors.append(
                Error(
                    f"AGENT[{key!r}] must be a positive integer, not {cap!r}.", id="agent_core.E009"
                )
            )
    for scope, rate in settings.THROTTLE_RATES.items():
        if rate is not None and not (isinstance(rate, str) and _RATE.match(rate)):
            errors.append(
                Error(
                    f"AGENT['THROTTLE_RATES'][{scope!r}] = {rate!r} is not a rate.",
                    id="agent_core.E009",
                    hint='Give "<requests>/<s|min|hour|day>", e.g. "60/min", or None for no limit.',
                )
            )
    for name in ("LOCK_TIMEOUT_SECONDS", "IDLE_IN_TRANSACTION_SECONDS"):
        seconds = getattr(settings, name)
        if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0.001:
            errors.append(
                Error(
                    f"AGENT[{name!r}] must be a number of seconds above zero, not {seconds!r}.",
                    id="agent_core.E014",
                    hint="A stalled process would hold its row locks for as long as TCP lets it.",
                )
            )
    throttled = any(rate is not None for rate in settings.THROTTLE_RATES.values())
    backend = django_settings.CACHES.get("default", {}).get("BACKEND", "")
    if throttled and backend in _PROCESS_LOCAL_CACHES:
        errors.append(
            Warning(
                f"The API's throttles count in the default cache, {backend}, which each process "
                "keeps to itself: every process lets an actor take the full rate.",
                id="agent_core.W010",
                hint="Point CACHES['default'] at a shared cache, e.g. Django's RedisCache.",
            )
        )
    return errors


@register()
def check_tracing(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        tracing = agent_settings().TRACING
    except TypeError:
        return []  # reported by check_agent_settings
    if not tracing or importlib.util.find_spec("opentelemetry") is not None:
        return []
    return [
        Error(
            "AGENT['TRACING'] is on but opentelemetry is not installed",
            id="agent_core.E012",
            hint="pip install 'django-airlock[otel]' (and configure a tracer provider).",
        )
    ]


@register()
def check_approval_gate(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The gate in effect has every method of ``agent_core.gate.ApprovalGate``: the loop calls
    them inside its transactions, where a missing one would fail a run, not a deploy."""
    from .gate import ApprovalGate, gate_path

    try:
        gate = import_string(gate_path())
    except (TypeError, ImportError):
        return []  # reported by check_agent_settings
    wanted = sorted(name for name in vars(ApprovalGate) if not name.startswith("_"))
    missing = [name for name in wanted if not callable(getattr(gate, name, None))]
    if not missing:
        return []
    return [
        Error(
            f"The approval gate {gate_path()} lacks {', '.join(missing)} of the gate protocol "
            "(agent_core.gate.ApprovalGate).",
            id="agent_core.E013",
            hint="A gate that records nothing when calls start waiting may define "
            "`def requested(self, calls): pass`.",
        )
    ]


@register()
def check_action_tools_have_a_gate(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Without an approval app every action call is refused (``agent_core.gate.RefuseActions``)."""
    from .agents import registered_agents
    from .gate import RefuseActions, gate_path

    try:
        if import_string(gate_path()) is not RefuseActions:
            return []
        agents = registered_agents()
    except (TypeError, ImportError):
        return []  # reported by check_agent_settings
    acting = sorted(
        name for name, agent in agents.items() if any(t.kind == "action" for t in agent.local_tools)
    )
    if not acting:
        return []
    return [
        Warning(
            f"No approval app is installed, so the action tools of {', '.join(acting)} will be "
            "refused whenever the model calls them.",
            id="agent_core.W013",
            hint="Add 'approvals' to INSTALLED_APPS (or set AGENT['APPROVAL_GATE']).",
        )
    ]


@register(deploy=True)
def check_scripted_model(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The scripted model only replays ``/call`` lines: a demo's, not a deployment's."""
    from .agents import registered_agents

    if django_settings.DEBUG:
        return []
    try:
        agents = registered_agents()
    except (TypeError, ImportError):
        return []  # reported by check_agent_settings
    scripted = sorted(
        f"{name} ({agent.model_name})"
        for name, agent in agents.items()
        if agent.model_name.startswith("scripted:")
    )
    if not scripted:
        return []
    return [
        Warning(
            f"These agents use the scripted demo model with DEBUG off: {', '.join(scripted)}.",
            id="agent_core.W016",
            hint="Set AGENT['MODEL'] (or the agent's model) to a real one, e.g. "
            "'openai:gpt-4o-mini'.",
        )
    ]


@register()
def check_schema_generator(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``manage.py spectacular`` builds the schema with drf-spectacular's generator setting: only
    Airlock's adds the SSE streams that ``/agent/schema/`` serves."""
    from .api.generator import AirlockSchemaGenerator

    spectacular = getattr(django_settings, "SPECTACULAR_SETTINGS", {})
    configured = spectacular.get("DEFAULT_GENERATOR_CLASS")
    try:
        generator = import_string(configured) if isinstance(configured, str) else configured
    except ImportError:
        generator = None
    if isinstance(generator, type) and issubclass(generator, AirlockSchemaGenerator):
        return []
    return [
        Warning(
            "manage.py spectacular would write a schema without the SSE streams that "
            "/agent/schema/ serves.",
            id="agent_core.W015",
            hint='Set SPECTACULAR_SETTINGS["DEFAULT_GENERATOR_CLASS"] = '
            '"agent_core.api.generator.AirlockSchemaGenerator".',
        )
    ]
