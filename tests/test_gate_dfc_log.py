"""read_dfc_log over every real DFC excerpt in tests/fixtures/dfc-logs, plus malformed and huge input.

The expected verdicts, classes, nodes, ops and end nodes below were read off each file by hand.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from weftlib.gate import DfcResult, load_dfc_result, read_dfc_log

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "dfc-logs"  # public DFC output, copied into the project

SHUFFLE = "UnsupportedShuffleLayerError"
EXPECTED = {
    "01": dict(
        verdict="rejected",
        errors=[],
        end_nodes=(
            "CCT_OCR_nchw_1/CCT_OCR_1/mlp_1/dense_1/Gelu/mul",
            "CCT_OCR_nchw_1/CCT_OCR_1/mlp_1/dense_1/Gelu/truediv",
        ),
        last_frame="hailo_sdk_client/sdk_backend/parser/parser.py:239 in translate_onnx_model",
    ),
    "03": dict(
        verdict="rejected",
        errors=[
            (SHUFFLE, "CCT_OCR_1/patch_extractor_1/Reshape_1", None),
            (SHUFFLE, "CCT_OCR_1/mlp_1/dense_1/MatMul_post_reshape", None),
            (SHUFFLE, "CCT_OCR_1/transformer_block_1_1/mlp_1/dense_1_1/MatMul_pre_reshape", None),
            (SHUFFLE, "CCT_OCR_1/transformer_block_1_1/multi_head_attention_1/key_1/Reshape_1", None),
            (SHUFFLE, "CCT_OCR_1/transformer_block_4_1/multi_head_attention_3_1/key_1/Reshape_1", None),
            (SHUFFLE, "CCT_OCR_1/transformer_block_4_1/multi_head_attention_3_1/query_1/Reshape_1", None),
            (SHUFFLE, "CCT_OCR_1/transformer_block_4_1/multi_head_attention_3_1/value_1/Reshape_1", None),
            (SHUFFLE, "CCT_OCR_1/transformer_block_3_1/mlp_2_1/dense_5_1/MatMul_post_reshape", None),
            (SHUFFLE, "CCT_OCR_1/transformer_block_2_1/mlp_1_1/dense_4_1/MatMul_pre_reshape", None),
            (
                "UnsupportedSoftmaxLayerError",
                "CCT_OCR_1/transformer_block_2_1/multi_head_attention_1_1/softmax_1_1/Softmax",
                None,
            ),
        ],
        end_nodes=(),
        exception_class="ParsingWithRecommendationException",
    ),
    "04": dict(
        verdict="rejected",
        errors=[
            ("UnsupportedOperationError", "/model.23/GatherElements", "GatherElements"),
            ("UnsupportedOperationError", "/model.23/GatherElements_1", "GatherElements"),
            ("UnsupportedReduceMaxLayerError", "/model.23/ReduceMax", None),
            (SHUFFLE, "/model.23/Flatten", None),
            ("UnsupportedOperationError", "/model.23/TopK", "TopK"),
            ("UnsupportedOperationError", "/model.23/TopK_1", "TopK"),
            ("UnsupportedOperationError", "/model.23/Mod", "Mod"),
            ("UnsupportedGatherLayerError", "/model.23/Gather_3", None),
        ],
        end_nodes=(),
    ),
    "05": dict(
        verdict="rejected",
        errors=[
            ("UnsupportedLSTMLayerError", "LSTM__159", None),
            ("UnsupportedSliceLayerError", "Slice__166", None),
            ("UnsupportedSliceLayerError", "Slice__171", None),
            (SHUFFLE, "stage_4/dense/Tensordot", None),
            ("UnexpectedNodeError", "Squeeze__77", "Squeeze"),
            ("UnexpectedNodeError", "Squeeze__98", "Squeeze"),
            ("UnsupportedLSTMLayerError", "LSTM__182", None),
            ("UnsupportedSliceLayerError", "Slice__190", None),
            ("UnsupportedSliceLayerError", "Slice__196", None),
            ("UnexpectedNodeError", "Squeeze__119", "Squeeze"),
            ("UnexpectedNodeError", "Squeeze__141", "Squeeze"),
            (SHUFFLE, "stage_4/dense_1/Tensordot", None),
        ],
        end_nodes=(
            "stage_4/bidirectional/forward_lstm/PartitionedCall/transpose",
            "stage_4/tf.__operators__.getitem_3/strided_slice",
            "Concat__153",
            "stage_4/dense/Tensordot__804",
            "stage_4/tf.__operators__.getitem_1/strided_slice",
            "stage_4/dense/Tensordot/MatM",
        ),
    ),
    "07": dict(
        verdict="rejected",
        errors=[
            ("UnsupportedConcatLayerError", "/encoder/encoder/embeddings/Tile", None),
            ("UnsupportedModelError", "/encoder/encoder/embeddings/Concat_1", None),
        ],
        end_nodes=(),
    ),
    "10": dict(
        verdict="parsed",
        errors=[],
        end_nodes=(),
        model="yolov8s_seg",
        har="/work/yolov8s_seg.har",
        later="TypeError: expected str, bytes or os.PathLike object, not NoneType",
    ),
    "12": dict(verdict="parsed", errors=[], end_nodes=(), model="yolox_s_leaky", har="yolox_s_leaky.har"),
    "13": dict(
        verdict="rejected",
        errors=[],
        end_nodes=(),
        last_frame="hailo_sdk_client/model_translator/translator.py:58 in convert_model",
    ),
}


def fixture_text(prefix: str) -> str:
    (path,) = FIXTURES.glob(f"{prefix}_*.txt")
    return path.read_text().split("\n---\n", 1)[1]  # the lines above --- are provenance, not DFC output


def test_every_fixture_has_an_expectation():
    assert sorted(p.name[:2] for p in FIXTURES.glob("*.txt")) == sorted(EXPECTED)


@pytest.mark.parametrize("prefix", sorted(EXPECTED))
def test_fixture(prefix):
    want = EXPECTED[prefix]
    got = read_dfc_log(fixture_text(prefix))
    assert got.verdict == want["verdict"], got.reason
    assert [(e.cls, e.node, e.op) for e in got.errors] == want["errors"]
    assert got.end_nodes == want["end_nodes"]
    assert all(e.message for e in got.errors)
    for key, attr in (("model", "model"), ("har", "har"), ("later", "later_failure"), ("last_frame", "last_frame")):
        if key in want:
            assert getattr(got, attr) == want[key]
    if "exception_class" in want:
        assert got.exception.startswith(want["exception_class"] + ": Parsing failed")


def test_whole_fixture_files_including_provenance_keep_their_verdict():
    for prefix, want in EXPECTED.items():
        (path,) = FIXTURES.glob(f"{prefix}_*.txt")
        got = load_dfc_result(path)
        assert got.verdict == want["verdict"] and got.source == str(path), prefix


def test_fixture_07_wrapped_message_is_joined():
    (tile, concat) = read_dfc_log(fixture_text("07")).errors
    assert tile.message == "Unsupported concat over axis batch"
    assert concat.message == "Unsupported dimensions at concat layer"


HEADER = (
    "hailo_sdk_client.model_translator.exceptions.ParsingWithRecommendationException: "
    "Parsing failed. The errors found in the graph are:"
)
TOPK = "UnsupportedOperationError in op /m/TopK: TopK operation is unsupported"
RESHAPE = "UnsupportedShuffleLayerError in op /m/View: Failed to create layer (RESHAPE)"
ERF = "UnsupportedLayerError in op /m/Erf: cannot translate op=Erf"


def test_flattened_one_line_list_with_tail():
    text = (
        f"{HEADER} {TOPK} {RESHAPE} {ERF} Please try to parse the model again, using these end node names: /m/A, /m/B"
    )
    got = read_dfc_log(text)
    assert [(e.node, e.op) for e in got.errors] == [("/m/TopK", "TopK"), ("/m/View", "Reshape"), ("/m/Erf", "Erf")]
    assert got.errors[2].message == "cannot translate op=Erf"
    assert got.end_nodes == ("/m/A", "/m/B")


def test_comment_prefixes_indentation_and_repr_newlines():
    quoted = "\n".join(f"#   > {line}" for line in (HEADER, TOPK, RESHAPE))
    assert [e.op for e in read_dfc_log(quoted).errors] == ["TopK", "Reshape"]
    as_repr = f"{HEADER}\\n {TOPK}\\n {RESHAPE}\\n"
    got = read_dfc_log(as_repr)
    assert [e.op for e in got.errors] == ["TopK", "Reshape"] and got.errors[0].message.endswith("unsupported")


def test_cli_recommendation_alone_is_a_rejection():
    got = read_dfc_log("Parsing failed with recommendations for end node names: ['/a/Conv', \"/b/Mul\"].")
    assert got.verdict == "rejected" and got.end_nodes == ("/a/Conv", "/b/Mul")


def test_plain_exception_inside_the_parser_is_a_rejection_naming_no_op():
    text = (
        "[info] Translation started on ONNX model m\nTraceback (most recent call last):\n"
        '  File "/v/hailo_sdk_client/sdk_backend/parser/parser.py", line 220, in translate_onnx_model\n'
        "ValueError: 'onnx::Sub_640' is not in list\n"
    )
    got = read_dfc_log(text)
    assert got.verdict == "rejected"
    assert [(e.cls, e.node, e.op) for e in got.errors] == [("ValueError", None, None)]
    assert got.exception == "ValueError: 'onnx::Sub_640' is not in list"


def test_stray_exception_without_the_parser_is_unrecognised():
    got = read_dfc_log('Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nIndexError: boom')
    assert got.verdict == "unrecognised" and got.exception == "IndexError: boom"


def test_retry_after_failure_is_still_a_rejection():
    text = (
        f"{HEADER}\n {TOPK}\n[info] According to recommendations, retrying parsing with end node names: ['/m/A'].\n"
        "[info] Translation completed on ONNX model m\n[info] Saved HAR to: /x/m.har\n"
    )
    got = read_dfc_log(text)
    assert got.verdict == "rejected" and "retry" in got.reason and [e.op for e in got.errors] == ["TopK"]


def test_later_failure_does_not_turn_a_translation_into_a_rejection():
    text = (
        "[info] Translation completed on ONNX model m (completion time: 00:00:01.00)\n"
        "[info] Saved Hailo Archive file at m.har\n[info] Starting Model Optimization\n"
        "Traceback (most recent call last):\n"
        '  File "/v/hailo_sdk_client/runner/client_runner.py", line 9, in optimize\n'
        "ValueError: calibration set is empty\n"
    )
    got = read_dfc_log(text)
    assert (got.verdict, got.har, got.later_failure) == ("parsed", "m.har", "ValueError: calibration set is empty")


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "no DFC verdict"),
        ("   \n\n\t", "no DFC verdict"),
        ("[info] Translation started on ONNX model m\n[info] Restored ONNX model m", "truncated"),
        ("| `num_windows=1`, 825 nodes | **PARSE OK** |", "no DFC verdict"),
    ],
)
def test_nothing_classifiable_is_unrecognised_never_a_pass(text, reason):
    got = read_dfc_log(text)
    assert got.verdict == "unrecognised" and reason in got.reason


def test_binary_junk_around_a_real_error_is_tolerated():
    junk = bytes(range(256)) * 50
    got = read_dfc_log(junk + f"\n{HEADER}\n{TOPK}\n".encode() + junk)
    assert got.verdict == "rejected" and [e.op for e in got.errors] == ["TopK"]
    assert read_dfc_log(b"\x00\xff\xfe" * 10000).verdict == "unrecognised"


def test_truncated_everywhere_never_raises():
    text = f"{HEADER}\n {TOPK}\n {RESHAPE}\nPlease try to parse the model again, using these end node names: /a, /b"
    verdicts = {read_dfc_log(text[:cut]).verdict for cut in range(len(text) + 1)}
    assert verdicts <= {"rejected", "unrecognised"}


def test_huge_log_is_read_in_linear_time():
    """~12 MB of info lines and a 4 MB line of word characters (the worst case for backtracking regexes)."""
    info = "[info] Statistics Collector is done (completion time is 00:00:55.22)\n" * 170_000
    nasty = "a" * 4_000_000 + " in op " + "b" * 1000
    start = time.perf_counter()
    got = read_dfc_log(f"{info}{nasty}\n{HEADER}\n {TOPK}\n{info}")
    elapsed = time.perf_counter() - start
    assert got.verdict == "rejected" and [e.op for e in got.errors] == ["TopK"]
    assert elapsed < 15, f"{elapsed:.1f} s for ~28 MB"


def test_json_round_trip_and_bad_json(tmp_path):
    result = read_dfc_log(f"{HEADER}\n {TOPK}\n")
    path = tmp_path / "m.dfc.json"
    path.write_text(result.to_json())
    back = load_dfc_result(path)
    assert (back.verdict, back.errors, back.source) == (result.verdict, result.errors, str(path))
    with pytest.raises(ValueError, match="not a DFC result"):
        DfcResult.from_json('{"verdict": "parsed"}', "x.json")
    with pytest.raises(ValueError, match="not JSON"):
        DfcResult.from_json("{", "x.json")
    with pytest.raises(TypeError, match="text"):
        read_dfc_log(None)
