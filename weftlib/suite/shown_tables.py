"""pandas tables as a notebook's page shows them: every cell through `formatting.format_value`, so an absent
value reads "—" (never NaN or None), a number is rounded and written one way in every notebook (`1 × 10⁻⁶`, not
`1e-06` or `0.000001`), a mapping or list is spelled out rather than shown as its repr, and an error is its
sentence without the exception's class. The recorded values keep full precision: only what is shown changes.

`Recorder` installs the formatters in the notebook's kernel (`install`), so every `display(frame)` and every
frame a cell ends with is shown this way without a call in the notebook.
"""

from __future__ import annotations

import re
from typing import Any

from ..formatting import ABSENT, format_value

_EXPONENT = re.compile(r"(?<![\w.])\d(?:\.\d+)?e[-+]?\d+\b")  # 4.8e-07 inside a text a package wrote


def cell_text(value: Any) -> str:
    """One table cell as a page shows it (`format_value`); a number a package wrote into a text in Python's
    exponent notation (`4.8e-07`) is written as every other number is (`4.8 × 10⁻⁷`); an empty text is absent."""
    if isinstance(value, str) and not value.strip():
        return ABSENT
    if isinstance(value, str):
        return _EXPONENT.sub(lambda m: format_value(float(m.group())), format_value(value))
    return format_value(value)


def readable_frame(frame: Any) -> Any:
    """A copy of a DataFrame (or a Series, as one column) whose every cell is `cell_text`, labels kept."""
    import pandas as pd

    shown = frame.to_frame() if isinstance(frame, pd.Series) else frame
    return shown.map(cell_text)


def _html(frame: Any) -> str:
    """The frame's HTML, a number's `× 10⁻⁴` kept on one line in a narrow column."""
    return str(readable_frame(frame)._repr_html_()).replace(" × 10", "\u00a0×\u00a010")


def _plain(frame: Any, printer: Any, cycle: bool) -> None:
    printer.text(repr(readable_frame(frame)))


def install() -> bool:
    """Show every pandas DataFrame and Series of this IPython kernel as `readable_frame` (HTML and plain text);
    False outside IPython (a script or a test), where nothing is displayed."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    import pandas as pd

    formatters = shell.display_formatter.formatters
    for kind in (pd.DataFrame, pd.Series):
        formatters["text/html"].for_type(kind, _html)
        formatters["text/plain"].for_type(kind, _plain)
    return True
