"""Tables as a notebook's page shows them (issue 45): no NaN, None, dict repr, exception class or exponent
notation reaches a cell; numbers are written as every other page writes them."""

import math

import pandas as pd

from tests.unreadable import raw_values
from weftlib.suite import shown_tables


def test_every_cell_reads_as_a_page_says_it():
    frame = pd.DataFrame(
        {
            "seconds": [0.035455, math.nan],
            "peak": [None, 93551.0],
            "max_abs_diff": [3.576279e-07, 0.0],
            "shapes": [{"x": 5, "t": 1}, {"node": [1, 4, 144, 32]}],
            "reason": ["RuntimeError: Can't run CUTLASS FNA; NATTEN was not built with libnatten.", "ok"],
            "claim": ["max |spconv - ours| 4.8e-07", ""],
        }
    )
    shown = shown_tables.readable_frame(frame)
    assert shown["seconds"].tolist() == ["0.0355", "—"] and shown["peak"].tolist() == ["—", "93,551"]
    assert shown["max_abs_diff"].tolist() == ["3.58 × 10⁻⁷", "0"]
    assert shown["shapes"].tolist() == ["x: 5; t: 1", "node: 1, 4, 144, 32"]
    assert shown["reason"][0] == "Can't run CUTLASS FNA; NATTEN was not built with libnatten."
    assert shown["claim"].tolist() == ["max |spconv - ours| 4.8 × 10⁻⁷", "—"]
    html = shown_tables._html(frame)
    assert "3.58\u00a0×\u00a010⁻⁷" in html  # a number does not wrap inside its column
    assert not raw_values(f"<table>{html}</table>"), raw_values(html)
    assert raw_values(f"<table>{frame.to_html()}</table>")  # the check sees what pandas shows by itself
    assert shown_tables.readable_frame(pd.Series({"gpu": None}, name="value")).to_dict() == {"value": {"gpu": "—"}}


def test_the_kernel_shows_frames_readably_once_a_recorder_exists():
    from IPython.core.interactiveshell import InteractiveShell

    assert shown_tables.install() is False  # no IPython here: nothing to install
    shell = InteractiveShell.instance()
    try:
        assert shown_tables.install() is True
        data, _ = shell.display_formatter.format(pd.DataFrame({"a": [None, 1e-6]}))
        assert "—" in data["text/html"] and "1\u00a0×\u00a010⁻⁶" in data["text/html"] and "NaN" not in data["text/html"]
        assert "None" not in data["text/plain"]
    finally:
        InteractiveShell.clear_instance()
