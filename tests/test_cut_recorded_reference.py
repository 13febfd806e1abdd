"""06's cut proof held to a run already made with the chain's arithmetic (issue 44): the run recorded beside a
graph (02's at NAF's 512², 05's of a fixed graph), bound to that very file by its sha256 and run as written,
stands in for running the graph whole again; a stale, foreign, older or optimised record is refused by name and
the fresh proof runs; a chain that differs from the record is not proven; 05 keeps the fixed graph's run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from weftlib.gate.cut import proof as cut_proof
from weftlib.gate.cut.segments import HeldTo
from weftlib.gate.fix import recorded as rec
from weftlib.gate.graphs import Builder
from weftlib.gate.pages import cut_tables
from weftlib.gate.run import cutting, fixing
from weftlib.gate.vocabulary import Side
from weftlib.onnx_core import runtime


def _graph(name: str = "graph", scale: float = 2.0) -> onnx.ModelProto:
    """Conv, Relu, Sin (refused: the host), Conv: a chain of device, host and device segments."""
    g = Builder(name)
    x = g.conv1x1(g.input("x", [1, 8, 4, 4]), 8, 8, "/l0", seed=0)
    x = g.node("Relu", [x], "/l1/Relu")
    x = g.node("Sin", [g.node("Mul", [x, g.const("k", scale)], "/l2/Mul")], "/l2/Sin")
    g.output(g.conv1x1(x, 8, 8, "/l3", seed=3))
    return g.model()


def _as_written(path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The graph at `path` run by onnxruntime as written (optimisations off), by output name."""
    session = runtime.session(path, once=True, optimize=False)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs), strict=True))


def _recorded(folder: Path, name: str = "graph", *, as_written: bool = True) -> Path:
    """The graph written as an exporter writes it, with its run recorded beside it (`recorded.write_run`)."""
    path = folder / f"{name}.onnx"
    onnx.save(_graph(name), path)
    x = {"x": np.random.default_rng(7).standard_normal((1, 8, 4, 4)).astype(np.float32)}
    rec.write_run(rec.folder_for(path), x, _as_written(path, x), path, as_written=as_written)
    return path


def _no_fresh_run(monkeypatch) -> None:
    """A fresh proof starts with random inputs for the whole graph: refused here, so a pass used the record."""

    def refuse(*_a, **_k):
        raise AssertionError("the whole graph was run again")

    monkeypatch.setattr(cut_proof, "random_feeds", refuse)


def test_a_recorded_run_of_the_same_file_stands_in_for_the_whole_graph(tmp_path, ops, monkeypatch):
    path = _recorded(tmp_path)
    _no_fresh_run(monkeypatch)
    part = cutting.cut_all([path], ops, tmp_path / "cuts")[path]
    assert [s.runs_on for s in part.segments] == [Side.DEVICE, Side.HOST, Side.DEVICE]
    assert part.proven and part.held_to == HeldTo.RECORDED and part.held_to_note == "graph.proof/run.npz"
    written = json.loads((tmp_path / "cuts" / "graph" / "partition.json").read_text())
    assert written["chain_held_to"] == {"reference": str(HeldTo.RECORDED), "note": "graph.proof/run.npz"}
    assert cut_tables.coverage_table({path: part}, tmp_path)["graph run"].tolist() == ["recorded"]


def _rewritten(path: Path) -> None:
    """The graph exported again after its run was recorded: another constant, the same inputs and outputs."""
    onnx.save(_graph("graph", scale=3.0), path)


def _older(path: Path) -> None:
    """The run rewritten without the digest and the as-written mark, as records were before them."""
    run = rec.folder_for(path) / rec.RUN
    with np.load(run) as data:
        arrays = {k: data[k] for k in data.files if k not in (rec.DIGEST, rec.AS_WRITTEN)}
    np.savez(run, **arrays)  # type: ignore[arg-type]


def _foreign(path: Path) -> None:
    """Another graph's run copied beside this one."""
    other = _recorded(path.parent, "other")
    shutil.rmtree(rec.folder_for(path))
    shutil.copytree(rec.folder_for(other), rec.folder_for(path))


@pytest.mark.parametrize(
    ("spoil", "why"),
    [
        (_rewritten, "recorded on another file than graph.onnx"),
        (_older, "names no graph digest or no as-written mark"),
        (_foreign, "recorded on another file than graph.onnx"),
    ],
)
def test_a_stale_or_foreign_record_is_refused_by_name_and_the_full_proof_runs(tmp_path, ops, spoil, why):
    path = _recorded(tmp_path)
    spoil(path)
    reference, found = cutting.held_to(path)
    assert reference is None and why in found
    part = cutting.cut_all([path], ops, tmp_path / "cuts")[path]
    assert part.proven and part.held_to == HeldTo.FRESH and why in part.held_to_note


def test_a_run_made_with_optimisations_on_is_not_the_chains_arithmetic(tmp_path, ops):
    path = _recorded(tmp_path, as_written=False)
    part = cutting.cut_all([path], ops, tmp_path / "cuts")[path]
    assert part.held_to == HeldTo.FRESH and "optimisations on" in part.held_to_note and part.proven


def test_a_record_that_does_not_fit_the_graphs_outputs_is_refused(tmp_path):
    path = _recorded(tmp_path)
    run = rec.folder_for(path) / rec.RUN
    with np.load(run) as data:
        arrays = {k: data[k] for k in data.files}
    arrays = {
        (k.replace(rec.OUTPUT, f"{rec.OUTPUT}not_") if k.startswith(rec.OUTPUT) else k): v for k, v in arrays.items()
    }
    np.savez(run, **arrays)  # type: ignore[arg-type]
    reference, why = cutting.held_to(path)
    assert reference is None and "are not the graph's" in why


def test_no_record_is_no_note_and_the_fresh_proof_runs(tmp_path, ops):
    path = tmp_path / "plain.onnx"
    onnx.save(_graph("plain"), path)
    assert cutting.held_to(path) == (None, "")
    part = cutting.cut_all([path], ops, tmp_path / "cuts")[path]
    assert part.proven and part.held_to == HeldTo.FRESH and part.held_to_note == "seed 0"


def test_a_wrong_chain_is_not_proven_against_the_record(tmp_path, ops, monkeypatch):
    """The host segment rewritten after the cut (its Sin made a Cos): the chain no longer computes the graph, and
    the record says so, as a fresh run would."""
    path = _recorded(tmp_path)
    _no_fresh_run(monkeypatch)
    real = cut_proof.run_chain

    def mutated(part, folder, *args, **kwargs):
        host = next(s for s in part.segments if s.runs_on == Side.HOST)
        segment = onnx.load(str(Path(folder) / host.file))
        next(n for n in segment.graph.node if n.op_type == "Sin").op_type = "Cos"
        onnx.save(segment, str(Path(folder) / host.file))
        return real(part, folder, *args, **kwargs)

    monkeypatch.setattr(cut_proof, "run_chain", mutated)
    part = cutting.cut_all([path], ops, tmp_path / "cuts")[path]
    assert part.held_to == HeldTo.RECORDED and not part.proven and part.max_abs_diff > 0.1


def test_a_record_whose_outputs_are_not_the_graphs_fails_the_proof(tmp_path, ops):
    """The digest binds the run to the graph file, not its outputs to the graph: outputs edited after the run
    make the proof fail, never pass."""
    path = _recorded(tmp_path)
    run = rec.folder_for(path) / rec.RUN
    with np.load(run) as data:
        arrays = {k: data[k] + np.float32(1e-3) if k.startswith(rec.OUTPUT) else data[k] for k in data.files}
    np.savez(run, **arrays)  # type: ignore[arg-type]
    part = cutting.cut_all([path], ops, tmp_path / "cuts")[path]
    assert part.held_to == HeldTo.RECORDED and not part.proven


def _fold(rows: int) -> onnx.ModelProto:
    """The exporter's key transpose inside attention, folded and unfolded around it (BatchFoldAroundTranspose
    answers it at every size), then a Sin the host keeps: a graph 05 fixes on a record, and 06 cuts."""
    g = Builder("batch_fold")
    x = g.node("Mul", [g.input("x", [1, 4, rows, 8]), g.const("k", 2.0)], "pre/Mul")
    folded = g.node("Reshape", [x, g.ints("fold", [-1, rows, 8])], "fold/Reshape")
    t = g.node("Transpose", [folded], "fold/Transpose", perm=[0, 2, 1])
    back = g.node("Reshape", [t, g.ints("unfold", [1, 4, 8, rows])], "unfold/Reshape")
    g.output(g.node("Sin", [g.node("Mul", [back, g.const("k2", 3.0)], "post/Mul")], "post/Sin"))
    return g.model()


def _exported_with_reduced(folder: Path) -> Path:
    """`_fold(6)` with its run and the same builder's graph at 3 rows recorded beside it, as 02 records NAF's."""
    path = folder / "graph_lowres.onnx"
    onnx.save(_fold(6), path)
    x = {"x": np.random.default_rng(11).standard_normal((1, 4, 6, 8)).astype(np.float32)}
    record = rec.write_run(rec.folder_for(path), x, _as_written(path, x), path, as_written=True).parent
    onnx.save(_fold(3), record / rec.REDUCED)
    (record / rec.MANIFEST).write_text(json.dumps({"builder": "_fold", "inputs_from": "the test's seeded inputs"}))
    return path


def test_05_keeps_the_fixed_graphs_run_on_the_record_and_06_holds_its_cut_to_it(tmp_path, ops, monkeypatch):
    path = _exported_with_reduced(tmp_path)
    fixes = fixing.fix_all([path], [path.stem], ops, tmp_path / "fixed")
    assert fixes[path.stem].offered and fixes[path.stem].run is None  # written, not carried back
    (fixed,) = fixing.proven_fixed(tmp_path / "fixed").values()
    run, why = rec.cut_reference(fixed)
    assert run is not None and why == "" and run.source == "graph_lowres.fixed.proof/run.npz"
    assert np.array_equal(run.inputs["x"], rec.cut_reference(path)[0].inputs["x"])  # type: ignore[union-attr]
    for name, value in _as_written(fixed, run.inputs).items():  # the fixed graph's own run, as written
        assert np.array_equal(run.outputs[name], value)
    _no_fresh_run(monkeypatch)
    part = cutting.cut_all([fixed], ops, tmp_path / "cuts")[fixed]
    assert part.proven and part.held_to == HeldTo.RECORDED


def test_a_fixed_graph_rewritten_after_05_is_cut_against_a_fresh_run(tmp_path, ops):
    path = _exported_with_reduced(tmp_path)
    fixing.fix_all([path], [path.stem], ops, tmp_path / "fixed")
    (fixed,) = fixing.proven_fixed(tmp_path / "fixed").values()
    model = onnx.load(str(fixed))
    model.doc_string = "edited after 05 wrote it"
    onnx.save(model, str(fixed))
    part = cutting.cut_all([fixed], ops, tmp_path / "cuts")[fixed]
    assert part.proven and part.held_to == HeldTo.FRESH and "sha256 differs" in part.held_to_note


def test_05_keeps_no_run_where_the_fix_was_proven_in_full(tmp_path, ops):
    path = _exported_with_reduced(tmp_path)
    shutil.rmtree(rec.folder_for(path))
    fixing.fix_all([path], [path.stem], ops, tmp_path / "fixed")
    (fixed,) = fixing.proven_fixed(tmp_path / "fixed").values()
    assert not rec.folder_for(fixed).exists() and cutting.held_to(fixed) == (None, "")


def test_an_exports_kept_run_is_made_as_written_and_bound_to_the_file(tmp_path):
    """02's record as the export writes it (`naf_records.keeper`): the check's run with optimisations off, its
    digest the written file's, so 06 may hold a cut to it; the file exported again without a record refuses it."""
    import torch

    from weftlib.attention import naf_records
    from weftlib.onnx_core import export

    module = torch.nn.Sequential(torch.nn.Conv2d(4, 4, 1), torch.nn.GELU(), torch.nn.Conv2d(4, 2, 1)).eval()
    x = torch.randn(1, 4, 5, 5)
    path = tmp_path / "net_lowres.onnx"
    names = {"input_names": ["x"], "output_names": ["y"]}
    export.export(module, (x,), path, keep_run=naf_records.keeper(rec.folder_for(path)), **names)
    run, why = rec.cut_reference(path)
    assert run is not None and why == "", why
    assert np.array_equal(run.inputs["x"], x.numpy()) and np.array_equal(
        run.outputs["y"], _as_written(path, run.inputs)["y"]
    )
    export.export(torch.nn.Sequential(module, torch.nn.ReLU()).eval(), (x,), path, **names)
    assert rec.cut_reference(path)[0] is None and "sha256 differs" in rec.cut_reference(path)[1]


def _naf_exports(folder: Path, **kw):
    """The stand-in NAF's attention layer on images (06's `naf_attention_image`) exported small, as 02 exports it."""
    from weftlib import standins
    from weftlib.attention import naf, naf_variants

    hub = naf.load_hub(standins.NAF_HUB_DIR, "naf", dim=32, kernel_size=3)
    prepared = naf_variants.prepare_at(hub, 6, 4, 16, seed=1)
    return naf_variants.export_variants(
        prepared, folder, method="lowres", reference="shift", atol=1e-4, upsampler_variants=[], **kw
    )


def test_a_naf_variant_keeps_its_run_and_06_holds_its_cut_to_it_until_the_graph_changes(tmp_path, ops, monkeypatch):
    """02's rewritten NAF graphs (naf_device, naf_attention_image: 256 x 192² on the appendix) keep the export
    check's run from `KEEP_RUN_FROM` output elements, with no reduced graph (05 fixes no variant): 06 then proves
    their cut on it instead of running the graph whole; the file exported again after that run is refused."""
    (exported,) = _naf_exports(tmp_path, layer_variants=["image"], keep_from=0).values()
    path = exported.path
    # its cut is one device segment, proven by reading (tests/test_cut_by_reading.py): made to run its chain here
    monkeypatch.setattr("weftlib.gate.cut.partition.prove_by_reading", lambda *_a, **_k: None)
    assert exported.variant == "image" and (rec.folder_for(path) / rec.RUN).is_file()
    assert not (rec.folder_for(path) / rec.REDUCED).exists()
    run, why = rec.cut_reference(path)
    assert run is not None and why == "", why
    for name, value in _as_written(path, run.inputs).items():  # the graph's own outputs on the same inputs
        assert np.array_equal(run.outputs[name], value)
    with monkeypatch.context() as patched:
        _no_fresh_run(patched)
        part = cutting.cut_all([path], ops, tmp_path / "cuts")[path]
    assert part.proven and part.held_to == HeldTo.RECORDED and part.held_to_note == f"{path.stem}.proof/run.npz"
    model = onnx.load(str(path))
    model.doc_string = "exported again after its run was kept"
    onnx.save(model, str(path))
    part = cutting.cut_all([path], ops, tmp_path / "cuts")[path]
    assert part.proven and part.held_to == HeldTo.FRESH and "sha256 differs" in part.held_to_note


def test_reduced_graphs_exported_in_workers_warn_here_and_leave_no_record(tmp_path):
    """The faithful graphs' twins are exported two at a time once every graph is (`naf_variants._export_twin`): a
    twin that cannot be exported takes its record away, as before, and its warning reaches the caller from the
    forked worker."""
    import torch

    from weftlib.attention import naf_records, naf_variants
    from weftlib.workers import map_forked

    class Refuses(torch.nn.Module):
        def forward(self, *_args: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("no graph at this size")

    jobs = []
    for graph in (naf_variants.UPSAMPLER, naf_variants.LAYER):
        path = tmp_path / f"{naf_variants.stem(graph, 'faithful', 'lowres')}.onnx"
        path.write_bytes(b"the graph")
        (rec.folder_for(path)).mkdir()
        (rec.folder_for(path) / rec.RUN).write_bytes(b"its run")
        twin = (graph, lambda _changes: Refuses(), [torch.zeros(2)], ["x"], "faithful", ())
        jobs.append((twin, path, "lowres", 1e-4, "4x4"))
    caught = map_forked(naf_variants._export_twin, jobs, workers=2)
    assert [len(m) for m in caught] == [1, 1] and all("no record for the fix's proof" in m[0] for m in caught)
    assert not any(rec.folder_for(job[1]).exists() for job in jobs)
    with pytest.warns(UserWarning, match="no record for the fix's proof"):
        naf_records.warn_again(caught[0])
