"""Sphinx configuration for django-dbqueue's documentation.

Build it with ``./dev docs`` (warnings are errors, as in CI). The pages are
Markdown, read by MyST-Parser; the API reference is generated from the
code's docstrings by autodoc, with the test project's settings on SQLite so
that the models import without a database server.
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "testproject")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "testproject.settings")
os.environ["DBQUEUE_DATABASE"] = "sqlite"

import django  # noqa: E402

django.setup()

import django_dbqueue  # noqa: E402

project = "django-dbqueue"
author = "The django-dbqueue authors"
copyright = "2026, the django-dbqueue authors"
release = django_dbqueue.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
# Files in docs/ that are not pages: the deploy recipes are included
# with literalinclude, the JSON files are benchmark records.
exclude_patterns = ["_build", "deploy", "*.json"]

myst_enable_extensions = ["colon_fence", "deflist", "fieldlist"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"

html_theme = "furo"
html_title = f"django-dbqueue {release}"
html_static_path: list[str] = []
