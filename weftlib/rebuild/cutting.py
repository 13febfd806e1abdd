"""An export cut at the zoo's parser nodes, and whether the zoo's nodes are the exporter's own.

The DFC parses from its start nodes to its end nodes (`translate_onnx_model(start_node_names, end_node_names)`),
so the graph the gate judges is the export cut there (`onnx.utils.Extractor`): the data inputs of the start node
become the inputs, the first outputs of the end nodes the outputs. Provenance: where the zoo's config names
parser nodes (`params/model_zoo.yaml`, `weftlib.gate.record.zoo`) and every one is a node of the export, the
export is shown to be the zoo's graph (`SHOWN`); else the exporter is the one the source names, and the rebuild
is `INFERRED` from it.
"""

from __future__ import annotations

from enum import StrEnum

import onnx
from onnx.utils import Extractor

from ..gate.record import zoo
from .recipes import Recipe


class Provenance(StrEnum):
    """How far a rebuild is known to be the graph the DFC parsed."""

    SHOWN = "shown"  # the zoo's parser nodes are nodes of the export
    INFERRED = "inferred"  # the source names the exporter; the nodes do not show it
    NOT_REBUILT = "not rebuilt"  # no exporter named (`recipes.NOT_REBUILT` says why)


class CutError(ValueError):
    """A recipe names a node the export does not have."""


def zoo_nodes(network: str) -> tuple[str, ...]:
    """The parser's start and end nodes the zoo's config names for `network` (empty: none, or not a zoo network)."""
    found = [o for o in zoo.parse_observations() if o.network == network and o.nodes is not None]
    return (*found[0].nodes.start, *found[0].nodes.end) if found and found[0].nodes else ()


def provenance(exported: list[str], recipe: Recipe) -> Provenance:
    """SHOWN where the zoo names parser nodes for the recipe's network and all are among the export's node names
    (`exported`), else INFERRED."""
    named = zoo_nodes(recipe.network)
    return Provenance.SHOWN if named and set(named) <= set(exported) else Provenance.INFERRED


def cut(model: onnx.ModelProto, recipe: Recipe) -> onnx.ModelProto:
    """`model` from the recipe's start node to its end nodes (either absent: the graph's own inputs or outputs),
    shapes inferred."""
    model = onnx.shape_inference.infer_shapes(model)
    if not recipe.ends and not recipe.start:
        return model
    nodes = {n.name: n for n in model.graph.node}
    missing = [n for n in (*recipe.ends, recipe.start) if n and n not in nodes]
    if missing:
        raise CutError(f"{recipe.network}: the export has no node {missing[0]!r} to cut at")
    constants = {i.name for i in model.graph.initializer} | {
        out for n in model.graph.node if n.op_type == "Constant" for out in n.output
    }
    inputs = (
        [i for i in nodes[recipe.start].input if i and i not in constants]
        if recipe.start
        else [i.name for i in model.graph.input if i.name not in constants]
    )
    outputs = [nodes[n].output[0] for n in recipe.ends] if recipe.ends else [o.name for o in model.graph.output]
    return onnx.shape_inference.infer_shapes(Extractor(model).extract_model(inputs, outputs))
