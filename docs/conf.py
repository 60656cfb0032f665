"""Sphinx configuration of the Airlock manual (``make docs``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import django

DOCS = Path(__file__).resolve().parent
sys.path[:0] = [str(DOCS.parent), str(DOCS / "_ext")]
# The reference pages read the apps (settings, checks, schema) as a project that installs them.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
os.environ.setdefault("SECRET_KEY", "docs-build-only")
django.setup()

project = "Airlock"
author = "The Airlock authors"
copyright = "Airlock authors"
release = "0.1.0"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinxcontrib.mermaid",
    "airlock_reference",
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "screenshots/README.md"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
myst_fence_as_directive = ["mermaid"]
# Quotes stay as typed: the reference quotes code (AGENT['MODEL']), where curly ones mislead.
smartquotes = False

html_theme = "furo"
html_title = "Airlock"
# `make docs` unpacks mermaid's npm package here, so pages draw their diagrams without a CDN.
html_static_path = ["_build/vendor"]
mermaid_use_local = "mermaid/mermaid.esm.min.mjs"
mermaid_version = ""
mermaid_fullscreen = False  # its button is a glyph few fonts have

autodoc_typehints = "description"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "undoc-members": False}

# Every cross-reference must resolve, except to what has no documentation of its own here
# (the standard library, Django, pydantic, typing's names in signatures, the models).
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(typing|collections|datetime|django|pydantic|rest_framework|enum|decimal)\..*"),
    (r"py:.*", r"(Any|Callable|Awaitable|Iterable|Iterator|Sequence|Mapping|Literal|Self|T|F)"),
    (r"py:.*", r"agent_core\.models\..*"),  # Django models: see the state machines page
    (r"py:.*", r"(str|int|float|bool|dict|list|tuple|set|frozenset|bytes|None|type|object)"),
]
