"""Each exported graph's identity, written by its exporter in the parity file beside it and read by the gate
(`gate.run_graphs.GraphIdentity`): the gate takes no graph's kind from its file name, and the formulation names
and the like are defined once."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import onnx
import pytest
import torch

from weftlib.gate.compiler.dfc_target import default_arch
from weftlib.gate.fix import fix_model, write_fix
from weftlib.gate.graphs import Builder
from weftlib.gate.record import public_record
from weftlib.gate.run import fixing, gating
from weftlib.gate.run_graphs import (
    UNKNOWN,
    GraphIdentity,
    fixed_of,
    identity,
    kind_label,
    of_kind,
    unknown_identity,
)
from weftlib.gate.vocabulary import GraphKind, GraphNotebook
from weftlib.onnx_core import export as onnx_export
from weftlib.onnx_core import parity

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "weftlib"
CHECK = {"max_abs_diff": 0.0, "atol": 1e-4, "parity_ok": True}


def _graph(folder: Path, stem: str, found: GraphIdentity | None) -> Path:
    """A small graph saved as `<stem>.onnx`, with a parity file holding `found` (none at all for None)."""
    g = Builder(stem)
    g.output(g.conv1x1(g.input("x", [1, 4, 8, 8]), 4, 4, "conv"))
    path = folder / f"{stem}.onnx"
    onnx.save(g.model(), path)
    if found is not None:
        parity.write(path, CHECK, found.as_json())
    return path


def _rename(path: Path, stem: str) -> Path:
    """The graph and its parity file moved to a new stem (what a user renaming files does)."""
    target = path.with_name(f"{stem}.onnx")
    path.rename(target)
    if parity.path(path).is_file():
        parity.path(path).rename(parity.path(target))
    return target


FAITHFUL = GraphIdentity(GraphNotebook.ATTENTION, GraphKind.FAITHFUL, "shift", "16^2")
VARIANT = GraphIdentity(GraphNotebook.ATTENTION, GraphKind.VARIANT, geometry="16^2", variant_of="16p2_shift")


def test_the_kind_follows_the_parity_file_whatever_the_graph_is_named(tmp_path):
    # names that the old rule (a stem ending in a formulation, no `__`) would have read the other way round
    faithful = _graph(tmp_path, "image_16p2", FAITHFUL)
    variant = _graph(tmp_path, "16p2_shift", VARIANT)
    user = _graph(tmp_path, "dit_faithful", None)  # a user's ONNX: no parity file
    models = [faithful, variant, user]
    assert fixing.faithful(models) == ["image_16p2"]
    assert of_kind(models, GraphKind.VARIANT) == [variant]
    assert unknown_identity(models) == ["dit_faithful"] and kind_label(user) == UNKNOWN
    assert kind_label(faithful) == "faithful (02, shift, 16^2)"
    assert kind_label(variant) == "variant (02, 16^2, of 16p2_shift)"

    renamed = [_rename(faithful, "x__variant"), _rename(variant, "naf_lowres"), _rename(user, "conv_im2col")]
    assert fixing.faithful(renamed) == ["x__variant"]  # the identity went with the file
    assert of_kind(renamed, GraphKind.VARIANT) == [renamed[1]] and unknown_identity(renamed) == ["conv_im2col"]
    assert fixing.faithful(renamed, skip=["x__variant"]) == []


def test_06s_answer_graphs_are_held_to_their_identities_a_faithful_graph_first_then_its_variants(tmp_path):
    from weftlib.gate.run import cutting

    faithful, variant = _graph(tmp_path, "16p2_shift", FAITHFUL), _graph(tmp_path, "image_16p2", VARIANT)
    user = _graph(tmp_path, "attn", None)
    models = [faithful, variant, user]
    right = {"attention": ["16p2_shift", "image_16p2"], "a user's": ["attn"], "absent": ["nowhere"]}
    assert cutting.answer_models(models, right) == {"16p2_shift": faithful, "image_16p2": variant, "attn": user}
    assert cutting.misplaced({"16p2_shift": faithful, "image_16p2": variant}, right) == []
    with pytest.raises(ValueError, match=r"image_16p2 is variant \(02, 16\^2, of 16p2_shift\), not faithful"):
        cutting.answer_models(models, {"attention": ["image_16p2", "16p2_shift"]})


def test_a_graph_of_unknown_identity_is_still_gated_and_says_so(tmp_path, ops):
    from weftlib.gate import device_gate, gate_table

    user = _graph(tmp_path, "net", None)
    ours = _graph(tmp_path, "16p2_shift", FAITHFUL)
    results = {m: device_gate(m, ops) for m in (user, ours)}
    assert all(r.read for r in results.values())
    table = gate_table(results, tmp_path)
    assert list(table["graph"]) == [UNKNOWN, "faithful (02, shift, 16^2)"]
    assert table["torch vs onnxruntime"].iloc[0] == "no export check"
    _, copies = gating.pack_models([user, ours], tmp_path / "pack", default_arch())  # what 05 gates: the pack's copies
    assert [identity(c) for c in copies] == [None, FAITHFUL] and fixing.faithful(copies) == ["16p2_shift"]


def test_an_identity_is_checked_when_made_and_when_read(tmp_path):
    assert GraphIdentity.from_json(FAITHFUL.as_json()) == FAITHFUL and FAITHFUL.kind is GraphKind.FAITHFUL
    assert GraphIdentity.from_json({"notebook": "02_export_attention", "kind": "faithful"}).formulation == ""
    with pytest.raises(ValueError, match="must name the graph"):
        GraphIdentity(GraphNotebook.SPARSE, GraphKind.VARIANT)
    with pytest.raises(ValueError, match="no variant"):
        GraphIdentity(GraphNotebook.SPARSE, GraphKind.FAITHFUL, variant_of="conv_im2col")
    with pytest.raises(ValueError, match="kind"):
        GraphIdentity.from_json({"notebook": "02_export_attention", "kind": "faithfull"})
    with pytest.raises(ValueError, match="notebook"):
        GraphIdentity.from_json({"notebook": "", "kind": "faithful"})
    with pytest.raises(ValueError, match="keys"):
        GraphIdentity.from_json({"notebook": "02_export_attention", "kind": "faithful", "stem": "x"})
    assert GraphIdentity("", GraphKind.FIXED, variant_of="net").notebook == ""  # a fix of a user's ONNX

    path = _graph(tmp_path, "bad", None)
    parity.path(path).write_text(json.dumps({**CHECK, "identity": {"kind": "variant"}}))
    with pytest.raises(ValueError, match=r"bad\.parity\.json"):
        identity(path)
    assert kind_label(path).startswith("unreadable identity: bad.parity.json")
    parity.path(path).write_text(json.dumps(CHECK))  # a parity file from before identities were written
    assert identity(path) is None
    with pytest.raises(ValueError, match="keys"):
        parity.write(path, {"atol": 1.0}, None)  # half a check is never written


def test_the_export_writes_the_identity_it_is_given_and_none_where_none_is(tmp_path):
    module = torch.nn.Linear(4, 3).eval()
    args = (torch.randn(2, 4),)
    report = onnx_export.export(
        module, args, tmp_path / "lin.onnx", input_names=["x"], output_names=["y"], identity=FAITHFUL.as_json()
    )
    written = json.loads(parity.path(report.path).read_text())
    assert written["identity"] == FAITHFUL.as_json() and written["parity_ok"] and identity(report.path) == FAITHFUL
    plain = onnx_export.export(module, args, tmp_path / "plain.onnx", input_names=["x"], output_names=["y"])
    assert "identity" not in json.loads(parity.path(plain.path).read_text()) and identity(plain.path) is None


def test_gate_fix_writes_the_fixed_graphs_identity_and_06_reads_what_it_fixes_from_it(tmp_path, ops):
    source = tmp_path / "graphs"
    source.mkdir()
    original = source / "named_oddly.onnx"
    onnx.save(public_record.BUILDERS["clef-expand"](), original)
    parity.write(original, CHECK, FAITHFUL.as_json())
    written = write_fix(fix_model(original, ops), tmp_path / "fixed" / "ce")
    assert written is not None
    assert identity(written) == GraphIdentity(
        GraphNotebook.ATTENTION, GraphKind.FIXED, "shift", "16^2", variant_of="named_oddly"
    )
    assert json.loads(parity.path(written).read_text())["max_abs_diff"] == 0.0  # the original's check, kept
    assert fixed_of(written) == "named_oddly"
    assert fixing.proven_fixed(tmp_path / "fixed") == {"named_oddly": written}  # by identity, not by folder name

    user = tmp_path / "user" / "net.onnx"
    user.parent.mkdir()
    shutil.copyfile(original, user)  # the same graph with no parity file: a user's ONNX
    fixed = write_fix(fix_model(user, ops), tmp_path / "user_fixed")
    assert fixed is not None and identity(fixed) == GraphIdentity("", GraphKind.FIXED, variant_of="net")
    assert device_gate_parity(fixed, ops) is None  # an identity alone is no export check
    with pytest.raises(ValueError, match="not a fixed graph"):
        fixed_of(original)


def device_gate_parity(path: Path, ops) -> dict | None:
    from weftlib.gate import device_gate

    result = device_gate(path, ops)
    assert result.read and not result.problems, result.problems
    return result.parity


# ---------------------------------------------------------------------------------------- written once


def _sources() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(), str(p)) for p in sorted(LIBRARY.rglob("*.py"))}


def test_the_gate_reads_no_kind_from_a_file_name():
    gate = LIBRARY / "gate"
    names = {"VARIANT_MARK", "is_faithful", "FORMULATIONS"}
    picking = [*(gate / "run").glob("*.py"), gate / "run_graphs.py", gate / "pages" / "fix_tables.py"]
    for path, tree in _sources().items():
        if not path.is_relative_to(gate):
            continue
        defined = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
            n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
        }
        assert not defined & names, (path, defined & names)
        if path not in picking:
            continue
        # where the gate picks graphs, a stem's ending or a `__` in it told faithful from variant, and a fixed
        # graph's name its original
        for node in ast.walk(tree):
            by_ending = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            if by_ending and node.func.attr in ("endswith", "removesuffix") and _reads_stem(node.func.value):
                raise AssertionError(f"{path}:{node.lineno}: a kind read from a file name")
            by_mark = isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) and node.left.value == "__"
            if by_mark and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
                raise AssertionError(f"{path}:{node.lineno}: a variant told by its name")


def _reads_stem(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr in ("stem", "name")) or (
        isinstance(node, ast.Name) and node.id in ("stem", "name")
    )


def test_every_export_of_the_library_writes_an_identity():
    calls = [
        (path, node)
        for path, tree in _sources().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "export"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "onnx_export"
    ]
    assert len(calls) >= 8, calls  # 02's sweep, NAF's graphs and images, 03's methods and layouts, 04's variants
    missing = [f"{p.relative_to(ROOT)}:{c.lineno}" for p, c in calls if "identity" not in {k.arg for k in c.keywords}]
    assert not missing, missing


def test_the_formulation_names_are_written_once_and_imported_everywhere():
    from weftlib.attention import formulations, neighborhood
    from weftlib.sparse import conv

    assert tuple(formulations.FORMULATIONS) == neighborhood.METHODS
    names = set(neighborhood.METHODS) | set(conv.METHODS)
    lists: dict[str, list[str]] = {name: [] for name in names}
    for path, tree in _sources().items():
        for node in ast.walk(tree):
            items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
            if not isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict) or items is None:
                continue
            written = {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}
            if len(written & names) >= 2:  # a list of formulations, not one named in passing
                for name in written & names:
                    lists[name].append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert {name: where for name, where in lists.items() if len(where) > 1} == {}
