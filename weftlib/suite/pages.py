"""The jinja2 environment the suite's pages are rendered from: the templates in templates/ (package data), HTML
escaped, the RFD page's Markdown not (its inline SVG passes through), and a `code` filter for backticks.
"""

from __future__ import annotations

import re

import jinja2
import markupsafe

ENV = jinja2.Environment(  # the pages are templates in templates/; HTML is escaped, the RFD page's Markdown is not
    loader=jinja2.PackageLoader("weftlib.suite", "templates"),
    autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
    undefined=jinja2.StrictUndefined,
)
ENV.filters["code"] = lambda text: markupsafe.Markup(
    re.sub(r"`([^`]+)`", r"<code>\1</code>", str(markupsafe.escape(text)))
)
