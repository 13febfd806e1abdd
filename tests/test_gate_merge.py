"""The merge: device segments as few as acyclicity allows (held to an exhaustive search of every segmentation
of small random graphs), crumbs left on the host, and every merged cut still proven equal in onnxruntime."""

from __future__ import annotations

import random

import onnx
import pytest

from tests.test_gate_partition import cut_of
from weftlib.gate.cut import merge
from weftlib.gate.cut.merge import LINK, MERGED, UNMERGED, CutRule, mergeable_pairs, quotient_acyclic
from weftlib.gate.cut.partition import cut, partition
from weftlib.gate.graphs import Builder
from weftlib.gate.vocabulary import Side

SHAPE = [1, 8, 4, 4]


def branches() -> onnx.ModelProto:
    """The issue's shape: two Conv-Relu branches from one input, one going on through a refused Sin and a Conv;
    and a second input with its own Conv."""
    g = Builder("branches")
    x, y = g.input("x", SHAPE), g.input("y", SHAPE)
    a = g.node("Relu", [g.conv1x1(x, 8, 8, "/a", seed=1)], "/a/Relu")
    b = g.node("Relu", [g.conv1x1(x, 8, 8, "/b", seed=2)], "/b/Relu")
    c = g.conv1x1(y, 8, 8, "/c", seed=3)
    g.output(a, c, g.conv1x1(g.node("Sin", [b], "/b/Sin"), 8, 8, "/d", seed=4))
    return g.model()


def test_independent_branches_share_one_device_segment_with_every_input(ops, tmp_path):
    merged, _, _ = cut_of(branches(), ops, tmp_path)
    assert [s.runs_on for s in merged.segments] == [Side.DEVICE, Side.HOST, Side.DEVICE] and merged.proven
    first = merged.device_segments[0]
    assert set(first.nodes) == {"/a/Conv", "/a/Relu", "/b/Conv", "/b/Relu", "/c/Conv"}
    assert first.start_node_names == ("x", "y") and first.net_input_shapes == {"x": SHAPE, "y": SHAPE}
    assert set(first.end_node_names) == {"/a/Relu", "/b/Relu", "/c/Conv"}
    model = onnx.load(str(tmp_path / "branches.onnx"))
    assert mergeable_pairs(merged.segments, model.graph.node) == []
    old, _ = cut(model, ops, rule=UNMERGED)
    assert sum(s.runs_on == Side.DEVICE for s in old) == 4  # each branch its own segment, as before the merge
    assert mergeable_pairs(old, model.graph.node)  # the check fails the old cut: it can find a merge


def test_a_path_through_the_host_keeps_two_device_segments_apart(ops, tmp_path):
    g = Builder("apart")
    x = g.conv1x1(g.input("x", SHAPE), 8, 8, "/p", seed=1)
    g.output(g.conv1x1(g.node("Sin", [x], "/Sin"), 8, 8, "/q", seed=2))
    part, _, _ = cut_of(g.model(), ops, tmp_path)
    nodes = onnx.load(str(tmp_path / "apart.onnx")).graph.node
    assert len(part.device_segments) == 2 and mergeable_pairs(part.segments, nodes) == []
    assert not quotient_acyclic(nodes, {"/p/Conv": 0, "/q/Conv": 0})  # merged, the Sin would run inside it


# ------------------------------------------------------------------------- the exhaustive search


def random_dag(seed: int, n: int) -> onnx.ModelProto:
    """`n` nodes, each reading one or two earlier tensors: Relu or Add (predicted to parse) or Sin (refused)."""
    rng = random.Random(seed)
    g = Builder(f"dag{seed}")
    made = [g.input("x", SHAPE)]
    read: set[str] = set()
    for i in range(n):
        op = rng.choice(["Relu", "Add", "Sin", "Relu", "Add", "Sin"])
        picks = rng.sample(made, 2) if op == "Add" and len(made) > 1 else [rng.choice(made)]
        made.append(g.node("Relu" if op == "Add" and len(picks) == 1 else op, picks, f"/n{i}"))
        read.update(picks)
    g.output(*[t for t in made[1:] if t not in read])
    return g.model()


def set_partitions(items: list[str]):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for smaller in set_partitions(rest):
        for i in range(len(smaller)):
            yield [*smaller[:i], [first, *smaller[i]], *smaller[i + 1 :]]
        yield [[first], *smaller]


def fewest_device_segments(model: onnx.ModelProto, device: list[str]) -> int:
    """Every grouping of the device nodes whose contraction leaves the graph acyclic (host nodes one by one):
    the fewest groups any of them has."""
    return min(
        len(groups)
        for groups in set_partitions(device)
        if quotient_acyclic(model.graph.node, {n: i for i, grp in enumerate(groups) for n in grp})
    )


@pytest.mark.parametrize("seed", range(24))
def test_the_merge_gives_the_fewest_device_segments_an_exhaustive_search_finds(ops, seed):
    model = random_dag(seed, n=6 + seed % 5)
    segments, _ = cut(model, ops, rule=CutRule(merge=True, crumbs_to_host=False))
    device = [n for s in segments if s.runs_on == Side.DEVICE for n in s.nodes]
    if not device:
        pytest.skip("every node of this draw is on the host")
    count = sum(s.runs_on == Side.DEVICE for s in segments)
    assert count == fewest_device_segments(model, device)
    assert mergeable_pairs(segments, model.graph.node) == []
    old, _ = cut(model, ops, rule=UNMERGED)
    assert sum(s.runs_on == Side.DEVICE for s in old) >= count


def crossed() -> onnx.ModelProto:
    """a -> Sin -> b and c -> Sin -> d, a and c independent, and d reading b: joining a with d (or b with c)
    would leave no way to three segments or fewer; the merge must join a with c and b with d."""
    g = Builder("crossed")
    x = g.input("x", SHAPE)
    a, c = g.node("Relu", [x], "/a"), g.node("Relu", [x], "/c")
    b = g.node("Relu", [g.node("Sin", [a], "/h1")], "/b")
    g.output(g.node("Add", [g.node("Sin", [c], "/h2"), b], "/d"))
    return g.model()


def three_levels() -> onnx.ModelProto:
    g = Builder("three")
    x = g.node("Relu", [g.input("x", SHAPE)], "/r0")
    side = g.node("Relu", [x], "/side")
    for i in (1, 2):
        x = g.node("Relu", [g.node("Sin", [x], f"/s{i}")], f"/r{i}")
    g.output(g.node("Add", [x, side], "/out"))
    return g.model()


@pytest.mark.parametrize("build", [crossed, three_levels])
def test_the_merge_is_the_fewest_on_graphs_built_to_tempt_a_greedy_join(ops, build):
    model = build()
    segments, _ = cut(model, ops, rule=CutRule(merge=True, crumbs_to_host=False))
    device = [n for s in segments if s.runs_on == Side.DEVICE for n in s.nodes]
    count = sum(s.runs_on == Side.DEVICE for s in segments)
    assert count == fewest_device_segments(model, device) == {"crossed": 2, "three": 3}[model.graph.name]
    assert mergeable_pairs(segments, model.graph.node) == []


def test_the_exhaustive_search_sees_a_path_through_the_host():
    """Its own control: on a device-host-device chain no grouping holds both device nodes."""
    g = Builder("control")
    x = g.node("Relu", [g.input("x", SHAPE)], "/r1")
    g.output(g.node("Relu", [g.node("Sin", [x], "/s")], "/r2"))
    model = g.model()
    assert fewest_device_segments(model, ["/r1", "/r2"]) == 2


@pytest.mark.parametrize("seed", [1, 5, 11])
def test_merged_cuts_of_random_graphs_are_proven_in_onnxruntime(ops, tmp_path, seed):
    part, _, _ = cut_of(random_dag(seed, 8), ops, tmp_path)
    assert part.proven and part.max_abs_diff <= part.tolerance


# -------------------------------------------------------------------------------------------- crumbs


def test_a_device_island_without_macs_stays_on_the_host(ops, tmp_path):
    g = Builder("crumb")
    x = g.node("Sin", [g.conv1x1(g.input("x", SHAPE), 8, 8, "/p", seed=1)], "/s1")
    x = g.node("Sin", [g.node("Relu", [x], "/Relu")], "/s2")
    g.output(g.conv1x1(x, 8, 8, "/q", seed=2))
    part, _, _ = cut_of(g.model(), ops, tmp_path)
    assert [(s.runs_on, s.nodes) for s in part.segments] == [
        (Side.DEVICE, ("/p/Conv",)),
        (Side.HOST, ("/s1", "/Relu", "/s2")),
        (Side.DEVICE, ("/q/Conv",)),
    ]
    assert part.moved_to_host["/Relu"].startswith("a crumb: its segment's 0 MACs")
    assert part.proven
    kept, _ = cut(onnx.load(str(tmp_path / "crumb.onnx")), ops, rule=UNMERGED)
    assert [s.runs_on for s in kept] == [
        Side.DEVICE,
        Side.HOST,
        Side.DEVICE,
        Side.HOST,
        Side.DEVICE,
    ]  # the old cut kept it


def test_an_island_with_fewer_macs_than_elements_it_moves_stays_on_the_host(ops, tmp_path):
    g = Builder("thin")
    x = g.node("Sin", [g.conv1x1(g.input("x", SHAPE), 8, 8, "/p", seed=1)], "/s1")
    thin = g.conv1x1(x, 8, 1, "/thin", seed=2)  # 8 x 16 MACs against 128 elements in and 16 out
    g.output(g.conv1x1(g.node("Sin", [thin], "/s2"), 1, 8, "/q", seed=3))
    part, _, _ = cut_of(g.model(), ops, tmp_path)
    assert "/thin/Conv" in part.moved_to_host and "128 MACs" in part.moved_to_host["/thin/Conv"]
    assert "144 elements" in part.moved_to_host["/thin/Conv"] and part.proven


def test_a_graph_without_macs_keeps_its_device_segments(ops, tmp_path):
    g = Builder("nomacs")
    x = g.node("Relu", [g.input("x", SHAPE)], "/r1")
    g.output(g.node("Relu", [g.node("Sin", [x], "/s")], "/r2"))
    part, _, _ = cut_of(g.model(), ops, tmp_path)
    assert [s.runs_on for s in part.segments] == [Side.DEVICE, Side.HOST, Side.DEVICE] and part.coverage.macs == (0, 0)


def test_the_host_link_is_pcie_3_x4_and_the_rate_the_vendor_states():
    assert round(LINK.bytes_per_s / 1e9, 2) == 3.94 and LINK.macs_per_s == 1e13
    assert LINK.seconds(int(LINK.bytes_per_s)) == pytest.approx(1.0)


def test_partition_takes_the_old_rule_too(ops, tmp_path):
    path = tmp_path / "b.onnx"
    onnx.save(branches(), str(path))
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old = partition(path, ops, tmp_path / "old", rule=UNMERGED)
    new = partition(path, ops, tmp_path / "new", rule=MERGED)
    assert len(old.device_segments) == 4 and len(new.device_segments) == 2
    assert old.coverage.crossings > new.coverage.crossings


# ---------------------------------------------------------------------- notebook 06's figures of it


def test_before_and_after_the_merge_notebook_06_shows_both(ops, tmp_path):
    from weftlib.gate.pages import cut_sentences, cut_tables
    from weftlib.gate.run import cutting

    models = []
    for name, model in (("b", branches()), ("c", random_dag(9, 8))):
        models.append(tmp_path / f"{name}.onnx")
        onnx.save(model, str(models[-1]))
    after = cutting.cut_all(models, ops, tmp_path / "segments")
    before = cutting.before_merge(models, ops, after)
    assert before[models[0]].prediction is after[models[0]].prediction
    assert cutting.merge_findings(after) == {}
    assert "segments 0 and 1 could be merged" in cutting.merge_findings(before)["b"]  # the old cut fails the check
    table = cut_tables.merge_table(after, before, tmp_path)
    row = table.set_index("graph").loc["b.onnx"]
    assert (row["device segments before"], row["device segments after"]) == (4, 2)
    assert row["tensors after"] < row["tensors before"] and row["MiB after"] < row["MiB before"]
    totals = cutting.merge_totals(after, before)
    assert totals["device_segments_before"] == cutting.cut_count(before) > totals["device_segments_after"]
    assert cut_sentences.merge_sentence(totals, 2).startswith(
        f"Over 2 graphs the merge takes the device segments from **{totals['device_segments_before']} to "
    )
    questions = {"q": ["b", "c"]}
    named = cutting.answer_models(models, questions)
    deploy = cut_tables.deployable_table(after, questions, named)
    assert list(deploy["graph"]) == ["b", "c"] and deploy["device graphs"].iloc[0] == 2
    link_ms = deploy[next(c for c in deploy.columns if c.startswith("ms on the link"))].iloc[0]
    assert link_ms == pytest.approx(1e3 * after[models[0]].coverage.bytes_crossing / LINK.bytes_per_s)
    assert deploy["ms of device MACs at the rated INT8 speed"].iloc[0] == pytest.approx(
        1e3 * after[models[0]].coverage.macs[0] / 1e13
    )
    answer, _, _ = cut_sentences.conclusion(after, named, 1e-6, {}, tmp_path / "run_dfc.sh", tmp_path, questions)
    assert answer.startswith("Every graph cut and proven (chain vs graph within 1 × 10⁻⁶): q: b: 2 device graph(s)")
    assert "; beside it c: " in answer


def test_the_dit_block_the_rfd_asks_about_cuts_into_two_device_graphs(ops, tmp_path):
    """dit_tokens__all at two blocks (the appendix's), exported through weftlib.dit at a small width: seven
    device segments before the merge around two host nodes, two after, proven equal."""
    from weftlib import dit

    model = dit.load_flow_model(None, blocks=2, channels=192)
    (variant,) = dit.exact_variants(model, dit.example_inputs(model, global_tokens=3), names=["tokens+all"])
    path = dit.export_variant(variant, tmp_path).path
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old = partition(path, ops, tmp_path / "old", rule=UNMERGED)
    new = cut_of_path(path, ops, tmp_path / "new")
    assert len(old.device_segments) == 7 and sum(s.runs_on == Side.HOST for s in old.segments) == 2
    assert len(new.device_segments) == 2 and new.proven
    assert new.coverage.crossings < old.coverage.crossings and new.coverage.macs == old.coverage.macs
    assert mergeable_pairs(new.segments, onnx.load(str(path)).graph.node) == []


def cut_of_path(path, ops, folder):
    from weftlib.gate.cut.proof import prove

    return prove(partition(path, ops, folder), path, folder)


def test_a_tensor_sized_only_at_run_time_counts_as_unbounded():
    """03's scatter export carries NonZero's [1, N?] output: the merge compared groupings by the elements they
    move and raised on its unknown dimension, so 06 failed on the whole run; such a tensor now costs most."""
    import math

    from onnx import TensorProto, helper

    from weftlib.onnx_core.walk import index_model

    nodes = [helper.make_node("NonZero", ["x"], ["idx"], name="nz"), helper.make_node("Relu", ["x"], ["y"], name="r")]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [
            helper.make_tensor_value_info("idx", TensorProto.INT64, [2, None]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4]),
        ],
    )
    indexed = index_model(onnx.shape_inference.infer_shapes(helper.make_model(graph)))
    assert merge.elements(indexed, ["y"]) == 4 and merge.elements(indexed, ["x", "idx"]) == math.inf
