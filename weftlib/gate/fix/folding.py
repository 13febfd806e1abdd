"""What `gate fix` does once its rewrites have settled: every node of the main graph that reads only constants
(initializers, Constant nodes, and what such nodes compute) becomes the constant it computes, so a table the
rewrites have just made constant (a Cos of a Range, say) does not leave a Concat or a Mul of constants behind
for the gate to judge. It finishes what the rewrites started: a graph no rewrite changed is not folded.

The folding is onnxscript's (`onnxscript.optimizer`'s `FoldConstantsPass`, which evaluates each node with
onnx's reference evaluator), held to nodes whose every input is a constant: its partial evaluation of the rest
of the graph (a Shape of a static tensor, a Reshape to the same shape) is not run, nor is any control-flow
node (an If on a constant condition would inline a branch that reads the graph's inputs), nor a node nothing
reads, nor one that computes a graph output (an initializer as an output is not a graph IR 3 can write). Nodes inside If branches and Loop bodies are left: a constant there would be an initializer of the
branch, which a graph below IR 4 cannot hold apart from the branch's inputs. The folded graph is proven like
any rewrite's (the loop records the folding as an `Applied` named `FOLD`).
"""

from __future__ import annotations

from onnxscript import ir
from onnxscript.optimizer import FOLDED_FROM_KEY, constant_folding

FOLD = "FoldConstants"  # the name the folding is recorded under in fix.json
# A folded constant of more than FOLD_LIMIT elements is made only where it replaces at least as many elements
# of constants that only its node read (onnxscript's own size rule): a broadcast, Expand, Tile or
# ConstantOfShape of constants is never written out larger than that, so folding cannot blow a small graph up
# (an attention mask expanded to [S, S] at 262144 tokens would be 2**36 elements). The inputs are not bounded:
# they are in the file already. 2**20 elements (4 MiB in float32) is one 1024 x 1024 weight matrix, small
# beside a graph's own weights; a rotary table of 4096 tokens x 128 channels is half of it.
FOLD_LIMIT = 1 << 20
KEPT = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"})  # quantization stays visible


def _reads_only_constants(node: ir.Node) -> bool:
    """Every input is a constant that is not also a graph input (an initializer a caller may override)."""
    return all(v is None or (v.const_value is not None and not v.is_graph_input()) for v in node.inputs)


def _control_flow(node: ir.Node) -> bool:
    return any(a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS) for a in node.attributes.values())


class _ConstantsOnly(constant_folding.FoldConstantsPass):
    """onnxscript's folding pass, asked only about main-graph nodes of the default domain that read constants."""

    def __init__(self) -> None:
        super().__init__(
            shape_inference=False,
            input_size_limit=FOLD_LIMIT,  # not applied: `should_fold` says yes or no to every node
            output_size_limit=FOLD_LIMIT,
            should_fold=lambda node: node.op_type not in KEPT,
        )
        self.main: ir.Graph | None = None

    def call(self, model: ir.Model) -> constant_folding.FoldConstantsResult:
        self.main = model.graph
        return super().call(model)

    def visit_function(self, function: ir.Function) -> None:  # a model's local functions are left as they are
        return None

    def process_node(self, node: ir.Node, is_function: bool) -> constant_folding.Replacement | None:
        if (
            node.graph is not self.main
            or node.domain not in ("", "ai.onnx")
            or _control_flow(node)
            or not _reads_only_constants(node)
            or not any(v.uses() for v in node.outputs)  # unread: left as the original has it
            or any(v.is_graph_output() for v in node.outputs)  # an output stays computed, not an initializer
        ):
            return None
        return super().process_node(node, is_function)


def _drop_dead(graph: ir.Graph, live_before: set[str]) -> None:
    """Remove the nodes the folding left unread (a Constant whose only reader was folded), and only those:
    a node unread in the original stays as it was."""
    changed = True
    while changed:
        changed = False
        for node in reversed(list(graph)):
            if (node.name or "") not in live_before:
                continue
            if any(v.uses() or v.is_graph_output() for v in node.outputs):
                continue
            graph.remove(node, safe=True)
            changed = True


def _live(graph: ir.Graph) -> set[str]:
    return {n.name or "" for n in graph if any(v.uses() or v.is_graph_output() for v in n.outputs)}


def fold_constants(model: ir.Model) -> None:
    """Fold, in place, every main-graph node of `model` that reads only constants (within `FOLD_LIMIT`), and
    drop the constants only those nodes read."""
    live = _live(model.graph)
    _ConstantsOnly()(model)
    _drop_dead(model.graph, live)
    for value in model.graph.initializers.values():  # onnxscript's note of what a constant was folded from
        value.metadata_props.pop(FOLDED_FROM_KEY, None)
        value.meta.pop(FOLDED_FROM_KEY, None)
