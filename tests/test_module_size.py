"""No module of weftlib/ is over 500 lines (the stand-ins' copies of outside code aside): a longer one holds
several topics that want their own modules (as the record's builders became a package of topics)."""

from __future__ import annotations

from tests.conftest import REPO

MAX_MODULE_LINES = 500


def test_no_library_module_is_over_five_hundred_lines():
    long = []
    for path in sorted((REPO / "weftlib").rglob("*.py")):
        if {"pixal_host", "naf_hub"} & set(path.parts):
            continue
        lines = len(path.read_text().splitlines())
        if lines > MAX_MODULE_LINES:
            long.append(f"{path.relative_to(REPO)} ({lines} lines)")
    assert not long, "modules over the bound:\n" + "\n".join(long)
