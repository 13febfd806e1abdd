"""Values spelled as a person reads them: the one formatter the appendix, tables and sentences share."""

import pytest

from weftlib import formatting


@pytest.mark.parametrize(
    "value, unit, digits, text",
    [
        (7.152557373046875e-07, None, 3, "7.15 × 10⁻⁷"),
        (3 * 2**30, "B", 3, "3 GiB"),
        (5_497_558_138_880, "B", 3, "5 TiB"),
        (512, "B", 3, "512 B"),
        (0.0834, "s", 3, "83.4 ms"),
        (1020.0, "s", 2, "17 min"),
        (110.4, "s", 2, "1 min 50 s"),
        (3725.0, "s", 3, "1 h 02 min"),
        (2.345, "x", 3, "2.35×"),
        (1234567, None, 3, "1,234,567"),
        (12345.678, None, 3, "12,300"),
        (0.5, None, 3, "0.5"),
        (True, None, 3, "yes"),
        (None, None, 3, "—"),
        (float("nan"), None, 3, "—"),
        (1e-6, None, 3, "1 × 10⁻⁶"),
        ({"DFC not run": 13}, None, 3, "DFC not run: 13"),
        (["gather", "matmul"], None, 3, "gather, matmul"),
        ([], None, 3, "none"),
        ("Flex only", None, 3, "Flex only"),
    ],
)
def test_format_value_reads_like_a_person_wrote_it(value, unit, digits, text):
    assert formatting.format_value(value, unit, digits) == text


def test_a_commit_is_quoted_by_its_digits_its_dirtiness_or_as_no_checkout():
    commit = "0123456789abcdef0123"
    assert formatting.commit_text(commit, False) == "0123456789ab"
    assert formatting.commit_text(commit, True) == "0123456789ab (dirty tree)"
    assert formatting.commit_text(commit, None, digits=None) == commit
    assert formatting.commit_text(None, None) == formatting.commit_text("", True) == formatting.NO_COMMIT


def test_a_place_in_a_yaml_file_is_named_as_its_reader_would():
    assert formatting.place(("notebooks", 2, "parameters"), "top level") == "notebooks[2].parameters"
    assert (
        formatting.place(("device_ops", "Gather", "evidence", 0, "seen"), "file")
        == "device_ops.Gather.evidence[0].seen"
    )
    assert formatting.place((), "file") == "file"


def test_absent_values_and_errors_read_as_a_page_says_them():
    import numpy as np

    assert formatting.format_value(np.float64("nan")) == formatting.ABSENT == "—"
    assert formatting.format_value(np.int64(93551)) == "93,551" and formatting.format_value(np.bool_(True)) == "yes"
    assert formatting.format_value("ModuleNotFoundError: No module named 'hailo_sdk_client'") == (
        "No module named 'hailo_sdk_client'"
    )
    dispatch = (
        "DispatchError: No ONNX function found for <OpOverload(op='aten.unsqueeze', overload='default')>. "
        "Failure message: No decompositions registered for the complex-valued input"
    )
    assert formatting.format_value({"dynamo": dispatch}) == "dynamo: No ONNX function found for aten.unsqueeze."
    assert formatting.error_sentence("torch._dynamo.exc.Unsupported: a call\nTraceback ...") == "A call"
    # a mapping inside a mapping is a table of its own: counted, not flattened into the line
    summary = {"cases": 64, "by_source": [{"source": "ADR", "agrees": 5}], "limits": {"a": {"b": 1}}}
    assert formatting.format_value(summary) == (
        "cases: 64; by_source: 1 entries (in full in its table); limits: 1 entries (in full in its table)"
    )
