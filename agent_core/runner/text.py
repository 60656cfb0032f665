"""Coalescing streamed text into frames: one frame every ``STREAM_FRAME_FLUSH_MS`` or KiB, not
one row a token."""

from __future__ import annotations

import time
from collections.abc import Callable

from ..conf import agent_settings


class TextBuffer:
    """Collects text deltas and hands them to ``flush`` in batches; ``take()`` returns the rest."""

    def __init__(self, flush: Callable[[list[str]], None]) -> None:
        self._flush = flush
        self._chunks: list[str] = []
        self._size = 0
        self._since = 0.0
        settings = agent_settings()
        self._max_age = settings.STREAM_FRAME_FLUSH_MS / 1000
        self._max_bytes = settings.STREAM_FRAME_FLUSH_BYTES

    def add(self, text: str) -> None:
        if not self._chunks:
            self._since = time.monotonic()
        self._chunks.append(text)
        self._size += len(text.encode())
        if self._size >= self._max_bytes or time.monotonic() - self._since >= self._max_age:
            self._flush(self.take())

    def take(self) -> list[str]:
        """What is buffered and not yet flushed; the buffer is empty afterwards."""
        chunks, self._chunks, self._size = self._chunks, [], 0
        return chunks
