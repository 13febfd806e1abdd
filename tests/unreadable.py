"""What a reader must never meet on a page of a run (issue 45): `nan`, `None`, a dict's repr, an exception's class
name, an object's repr (`<Figure size 1300x550 with 2 Axes>`), or a number in Python's exponent notation (`1e-06`: the pages write `1 × 10⁻⁶`). Read from what a page
shows as values: its tables' cells, the outputs of its cells and the index's lines; the notebooks' prose and code
are left out (prose may name `None` or an error on purpose)."""

from __future__ import annotations

import re
from pathlib import Path

RAW = {
    "nan": re.compile(r"\bnan\b", re.I),
    "None": re.compile(r"\bNone\b"),
    "dict repr": re.compile(r"\{'[^']*': "),
    "exception class": re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b"),
    "exponent notation": re.compile(r"\b\d(?:\.\d+)?e[-+]\d\d\b"),
    "object repr": re.compile(r"<[A-Za-z_][\w.]*(?: size [^>]*| object at 0x[0-9a-f]+)>"),
}
SHOWN = "td, th, .jp-OutputArea-output pre, p.bottom-line, table.answers li, .err, .weft-run-note"


def raw_values(html: str) -> list[tuple[str, str]]:
    """(what, where) for each raw value the page shows, `where` the text around it."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for hidden in soup(["script", "style"]):
        hidden.decompose()
    found = []
    for element in soup.select(SHOWN):
        if element.find_parent(class_="jp-InputArea") is not None:
            continue
        text = " ".join(element.get_text(" ").split())
        for what, pattern in RAW.items():
            found.extend((what, text[max(0, m.start() - 60) : m.end() + 40]) for m in pattern.finditer(text))
    return list(dict.fromkeys(found))


def raw_in_run(run_dir: Path) -> dict[str, list[tuple[str, str]]]:
    """Page file name -> its raw values, for every HTML page of a run folder (the index and each notebook's)."""
    pages = sorted(Path(run_dir).glob("*.html"))
    return {page.name: found for page in pages if (found := raw_values(page.read_text()))}
