"""Text that reorders what a person reads, shown for what it is (issue #35).

Unicode's bidirectional controls (U+202A-U+202E embeddings and overrides, U+2066-U+2069
isolates, U+200E/U+200F marks) are invisible and turn the characters after them around: an
argument ``"\u202e9.99"`` reads as a different amount than it is (the "Trojan Source" trick).
The console shows each as a visible token, ``[U+202E]``, wherever it shows text it did not write
(arguments, summaries, reasons, messages, the audit): a template filter, ``visible``.
"""

from __future__ import annotations

import re

BIDI_CONTROLS = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """``text`` with each bidi control shown as its code point, such as ``[U+202E]``."""
    return BIDI_CONTROLS.sub(lambda m: f"[U+{ord(m.group()):04X}]", text)
