"""An executed notebook as a standalone HTML page for readers: code folded, the runner's parameters cell
removed, and the parameters the run gave under the title.
"""

from __future__ import annotations

import re
from pathlib import Path

from .files import write_atomic
from .pages import ENV

HIDE_INPUT_TAG = "hide-input"
INJECTED_TAG = "injected-parameters"


def render_html(notebook: Path, target: Path, note: str = "") -> Path:
    """Executed notebook -> standalone HTML for readers: code folded (a "show code" button unfolds it), the
    runner's injected-parameters cell removed (it holds the run folder's local path), cells tagged
    `hide-input` showing only their output, and `note` (e.g. the parameters given) under the title."""
    import nbformat
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    exporter = HTMLExporter(template_name="lab")
    exporter.register_preprocessor(
        TagRemovePreprocessor(remove_input_tags={HIDE_INPUT_TAG}, remove_cell_tags={INJECTED_TAG}, enabled=True),
        enabled=True,
    )
    body, _ = exporter.from_notebook_node(nbformat.read(notebook, as_version=4))
    fold, toggle = (
        ENV.get_template("notebook_fold.html.j2").render(),
        ENV.get_template("notebook_toggle.html.j2").render(),
    )
    body = body.replace("</head>", fold + "</head>", 1)
    body = re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + toggle, body, count=1)
    if note:
        shown = ENV.get_template("run_note.html.j2").render(note=note)
        title_end = body.find("</h1>")
        body = body[: title_end + 5] + shown + body[title_end + 5 :] if title_end >= 0 else body
    write_atomic(target, body)
    return target
