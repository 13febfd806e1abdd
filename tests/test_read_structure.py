"""A graph read as structure (`walk.read_structure`: its weights left in the file beside it) is predicted as the
whole model is: a rule that needs a constant's value reads that tensor from the folder the graph came from."""

from __future__ import annotations

import onnx
import pytest
from onnx.external_data_helper import uses_external_data

from weftlib.gate.predict import rules as R
from weftlib.gate.predict.nodes import predict
from weftlib.gate.record.public_record import BUILDERS
from weftlib.onnx_core import walk


def _graphs() -> dict[str, onnx.ModelProto]:
    """Every hand-built case of the record and every rule's own example: graphs that reach every rule."""
    found = {f"case {name}": build() for name, build in BUILDERS.items()}
    found.update({f"rule {name}": rule.example() for name, rule in R.RULES.items()})
    return found


def test_every_graph_read_as_structure_is_predicted_as_the_whole_model(ops, tmp_path, monkeypatch):
    read_from_file = []
    constant = walk.Graph.constant

    def counted(self, tensor):
        if uses_external_data(tensor):
            read_from_file.append(tensor.name)
        return constant(self, tensor)

    monkeypatch.setattr(walk.Graph, "constant", counted)
    for i, (name, model) in enumerate(_graphs().items()):
        whole = predict(walk.index_model(model), ops)
        path = tmp_path / f"{i}" / "g.onnx"
        path.parent.mkdir()
        # every initializer to the file beside it, however small: a rule that reads one reads it from there
        onnx.save(model, str(path), save_as_external_data=True, location="g.onnx.data", size_threshold=0)
        structure = walk.read_structure(path)
        assert any(uses_external_data(t) for t in structure.model.graph.initializer) or not model.graph.initializer
        read = predict(structure, ops)
        assert (read.verdict, read.judgements) == (whole.verdict, whole.judgements), name
    assert read_from_file, "no rule read a constant's value: the comparison above proves nothing about it"


def test_a_constant_of_a_graph_indexed_without_its_folder_is_refused_by_name(tmp_path):
    model = BUILDERS[next(n for n, b in BUILDERS.items() if b().graph.initializer)]()
    expected = onnx.numpy_helper.to_array(model.graph.initializer[0])  # before the save moves it out of the model
    path = tmp_path / "g.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="g.onnx.data", size_threshold=0)
    bare = walk.index_model(onnx.load(str(path), load_external_data=False))
    tensor = bare.model.graph.initializer[0]
    with pytest.raises(ValueError, match=f"{tensor.name}: its value is external data"):
        bare.constant(tensor)
    structure = walk.read_structure(path)
    assert (structure.constant(structure.model.graph.initializer[0]) == expected).all()
