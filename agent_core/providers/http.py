"""What the HTTP providers share: vendor settings, error classification, cancelling a stream."""

from __future__ import annotations

import importlib
import json
import os
import socket
import threading
from collections.abc import Callable
from types import ModuleType, TracebackType
from typing import Any

from ..conf import VendorSettings
from ..exceptions import ModelError
from ..tools import AbortSignal

# Statuses worth another attempt: timeout, conflict, rate limit, and the server's own faults.
_RETRYABLE_STATUSES = frozenset({408, 409, 429})
_ABORT_POLL_SECONDS = 0.05


def connection(vendor: VendorSettings, *, env_prefix: str) -> tuple[str | None, str | None]:
    """``(base_url, api_key)``: the settings first, then ``<PREFIX>_BASE_URL`` / ``_API_KEY``."""
    base_url = vendor.BASE_URL or os.environ.get(f"{env_prefix}_BASE_URL") or None
    api_key = vendor.API_KEY or os.environ.get(f"{env_prefix}_API_KEY") or None
    if api_key is None and base_url is not None:
        # A self-hosted compatible server (vLLM, Ollama, llama.cpp) usually wants no key, but the
        # SDKs refuse to start without one.
        api_key = "unused"
    if api_key is None:
        raise ModelError(
            f"no API key: set AGENT[{env_prefix!r}]['API_KEY'] or {env_prefix}_API_KEY "
            f"(or a BASE_URL for a server that needs none)"
        )
    return base_url, api_key


def import_sdk(name: str) -> ModuleType:
    """The vendor's SDK, imported on first use: a project without it can still use the others."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ModelError(
            f"the {name} provider needs the {name} SDK: pip install 'django-airlock[{name}]'"
        ) from exc


def status_is_retryable(status: int) -> bool:
    """429, 408, 409 and 5xx are worth retrying; other 4xx (400, 401, 403, 404…) are not."""
    return status in _RETRYABLE_STATUSES or status >= 500


def malformed(exc: json.JSONDecodeError, vendor: str) -> ModelError:
    # A garbled stream is the server's (or a proxy's) fault, like a 5xx: worth another attempt.
    return ModelError(f"{vendor} sent a malformed stream chunk: {exc}", retryable=True)


def parse_args(raw: str) -> dict[str, Any] | str:
    """Tool arguments as streamed (a JSON text); the raw string when it is not a JSON object."""
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return raw
    return value if isinstance(value, dict) else raw


def as_text(output: Any) -> str:
    """A tool result as the text a vendor expects in a tool message."""
    return output if isinstance(output, str) else json.dumps(output, default=str)


def hang_up(response: Any) -> Callable[[], None]:
    """A function that ends ``response`` from another thread, waking a read blocked on it.

    Closing a socket does not wake a ``recv`` blocked on it in another thread; shutting it down
    does (the read returns end-of-stream). The reading thread then closes the response itself.
    """

    def shut_down() -> None:
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed: the read has ended anyway
        else:
            response.close()

    return shut_down


class AbortWatcher:
    """While active, hangs up the in-flight response as soon as ``abort`` is set.

    Checking the signal between chunks is not enough: a read blocked on a silent server would
    never see it. Hanging up ends that read, and the provider reports ``aborted``.
    """

    def __init__(self, abort: AbortSignal, response: Any) -> None:
        self.abort = abort
        self._close = hang_up(response)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="airlock-abort", daemon=True)

    def __enter__(self) -> AbortWatcher:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._done.is_set():
            if self.abort.wait(_ABORT_POLL_SECONDS):
                self._close()
                return

    def check(self) -> None:
        """Raise ``ModelError("aborted")`` if the run asked to stop."""
        if self.abort.is_set():
            raise ModelError("aborted")
