"""03's sentences: the conclusion is built from the values it is given, and says which route the numbers pick."""

from __future__ import annotations

from weftlib.sparse import summary


def _sentence(device_gib: float) -> str:
    return summary.conclusion_sentence(
        res=128,
        channels=64,
        dtype="float16",
        n=12_345,
        peaks={"dense": 3 << 30, "im2col": 40 << 20, "accumulate": 10 << 20, "scatter": 20 << 20},
        device_memory_gib=device_gib,
        table_bytes=5 << 20,
        scatter_ops={"Gather": 27, "ScatterND": 27, "MatMul": 27},
        predicted="no faithful export parses",
    )


def test_conclusion_names_the_lightest_route_and_its_ratio() -> None:
    text = _sentence(2.0)
    assert text.startswith(
        "Scatter, not densify: one 64-channel float16 layer at the 128 grid (12,345 occupied voxels)"
    )
    assert "needs 3 GiB densified against 10 MiB for the lightest sparse route (accumulate, 307x less)" in text
    assert "with 2 GiB on the device" in text and "neighbour table of 5 MiB" in text
    assert "(Gather x27, ScatterND x27)" in text and "MatMul" not in text
    assert text.endswith("Predictions from the public record: no faithful export parses.")


def test_conclusion_says_densify_fits_when_the_grids_fit_the_device() -> None:
    assert _sentence(8.0).startswith("Densify fits at this size (128 grid): ")


def test_scatter_ops_text_keeps_only_the_data_indexed_ops() -> None:
    assert summary.scatter_ops_text({"ScatterND": 2, "Add": 1, "GatherND": 1}) == "GatherND x1, ScatterND x2"


def test_views_show_bytes_in_their_units_and_the_rulebook_beside_its_rows() -> None:
    import pandas as pd

    measured = pd.DataFrame(
        [
            {
                "shape": "sphere",
                "res": 8,
                "N": 10,
                "method": "im2col",
                "C": 4,
                "dtype": "float32",
                "chunk_rows": None,
                "model_bytes": 2**20,
                "measured_bytes": 2**21,
                "measured_over_model": 2.0,
                "seconds": 0.1,
            }
        ]
    )
    shown = summary.measured_view(measured)
    assert shown[["model_MiB", "measured_MiB"]].iloc[0].tolist() == [1.0, 2.0] and "model_bytes" not in shown
    times = pd.DataFrame(
        [
            {
                "method": m,
                "given": g,
                "seconds": 1.0,
                "spread": 0.0,
                "over_fastest": 1.0,
                "rate_change": 0.0,
                "contended": False,
            }
            for m, g in (("auto", "rulebook"), ("im2col", "table"))
        ]
    )
    times.attrs["rulebook_seconds"] = 0.5
    assert summary.times_view(times)["rulebook_build_seconds"].tolist()[0] == 0.5
    assert pd.isna(summary.times_view(times)["rulebook_build_seconds"].tolist()[1])
    split = summary.split_view(pd.DataFrame([{"to_device_bytes": 2**31, "to_host_bytes": 2**30}]))
    assert split[["to_device_GiB", "to_host_GiB"]].iloc[0].tolist() == [2.0, 1.0]


def test_bench_table_and_export_parity() -> None:
    from types import SimpleNamespace

    table = summary.bench_table({"rows": [{"method": "auto", "of_limit": 0.5}, {"method": "im2col", "of_limit": 0.2}]})
    assert table.loc["auto", "of_limit"] == 0.5 and list(table.index) == ["auto", "im2col"]
    report = SimpleNamespace(parity_ok=True, max_abs_diff=1e-6, file_bytes=2048, path="conv_im2col.onnx")
    assert summary.export_parity({"im2col": report}) == {
        "im2col": {"parity_ok": True, "max_abs_diff": 1e-6, "file_bytes": 2048}
    }


def test_named_verdicts_name_faithful_exports_and_layouts() -> None:
    from types import SimpleNamespace

    reports = {"im2col": SimpleNamespace(path="a.onnx"), "dense": SimpleNamespace(path="b.onnx")}
    layouts = {"gathered": SimpleNamespace(path="c.onnx")}
    verdicts = {"a.onnx": "A", "b.onnx": "B", "c.onnx": "C"}
    named = summary.named_verdicts(reports, layouts, verdicts)
    assert named == {"conv_im2col": "A", "conv_dense": "B", "layout_gathered": "C"}
    assert summary.faithful_names(named) == ["conv_im2col", "conv_dense"]
