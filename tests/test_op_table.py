"""The op table without holes (issue 42, item 4): every op the public record or the vendor's tables name has an
entry in params/device_ops.yaml with its evidence, so a plain op is never unjudged merely for want of an entry;
and an entry the record is silent on says so (unjudged, with a probe asked or named), never a silent pass.

The names come from the record's own graphs (every rebuilt case, and the exporters' rebuilt graphs under the
`exports` marker), the DFC logs the record cites, and the vendor's DFC 5.3.0 tables as the record transcribes
them (tests/fixtures/vendor_tables_dfc530.yaml)."""

from __future__ import annotations

import re
from pathlib import Path

import onnx
import onnx.defs
import pytest
import yaml

from weftlib.gate.compiler.dfc_log import load_dfc_result
from weftlib.gate.compiler.probes import to_probe
from weftlib.gate.record.public_record import BUILDERS
from weftlib.gate.record.standing import op_key, op_standing
from weftlib.gate.vocabulary import Prediction, Seen

FIXTURES = Path(__file__).resolve().parent / "fixtures"
VENDOR = yaml.safe_load((FIXTURES / "vendor_tables_dfc530.yaml").read_text())
CITED_LOGS = ("03", "04", "05")  # the DFC logs params/device_ops.yaml cites as sources (tests/fixtures/dfc-logs/NN)
PATTERN_WORDS = {"SwiGLU"}  # the record's name for the gated MLP (Sigmoid, Mul, MatMul), not ONNX's SwiGLU op


def op_types(model: onnx.ModelProto) -> set[str]:
    """Every op type in `model`, subgraphs (If branches, Loop bodies) included."""
    found: set[str] = set()
    graphs = [model.graph]
    while graphs:
        for node in graphs.pop().node:
            found.add(node.op_type)
            for attribute in node.attribute:
                graphs.extend([attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else attribute.graphs)
    return found


def unlisted(names: dict[str, set[str]], ops) -> dict[str, list[str]]:
    """op -> where it was named, for each name with no entry."""
    return {op: sorted(where)[:3] for op, where in sorted(names.items()) if op not in ops.entries}


def vendor_names() -> set[str]:
    patterns = {op for sequence in VENDOR["patterns"].values() for op in sequence}
    return set(VENDOR["layers"]) | set(VENDOR["activations"]) | patterns


def test_every_op_of_a_rebuilt_public_case_has_an_entry(ops):
    named: dict[str, set[str]] = {}
    for case, build in BUILDERS.items():
        for op in op_types(build()):
            named.setdefault(op, set()).add(case)
    assert unlisted(named, ops) == {}


def test_every_onnx_op_a_public_case_names_in_words_has_an_entry(ops):
    """Cases not rebuilt name their ops only in `graph`, `error` and `note`: an ONNX op type written there (a
    capitalised word that is an op of the default domain) is an op the record names."""
    onnx_ops = {schema.name for schema in onnx.defs.get_all_schemas() if schema.domain == ""} - PATTERN_WORDS
    named: dict[str, set[str]] = {}
    for name, case in ops.cases.items():
        for word in re.findall(r"\b[A-Z][A-Za-z]+\b", " ".join((case.graph, case.error, case.note))):
            if word in onnx_ops:
                named.setdefault(word, set()).add(name)
    assert {"GlobalAveragePool", "Gemm"} <= set(named)  # the words are read: torchvision's head is named in notes
    assert unlisted(named, ops) == {}


def test_every_op_the_vendors_tables_name_has_an_entry_carrying_the_vendors_word(ops):
    names = vendor_names()
    assert {"LSTM", "Neg", "Split", "Erf"} <= names  # the transcription reads all three tables and the patterns
    missing = sorted(names - set(ops.entries))
    unsaid = sorted(
        op for op in names & set(ops.entries) if not any(e.seen == Seen.DOCUMENTED for e in ops.entries[op].evidence)
    )
    assert (missing, unsaid) == ([], [])


def test_every_op_a_cited_dfc_log_names_has_an_entry(ops):
    named: dict[str, set[str]] = {}
    for log in sorted((FIXTURES / "dfc-logs").glob("*.txt")):
        if log.name[:2] in CITED_LOGS:
            for error in load_dfc_result(log).errors:
                if error.op:
                    named.setdefault(error.op, set()).add(log.name)
    assert named, "the cited logs name no op: the log reader changed"
    assert unlisted(named, ops) == {}


def test_no_entry_is_a_silent_pass_and_every_silent_entry_is_asked(ops):
    """A parse rests on weighed evidence; an entry judged by its own evidence that the record leaves unjudged
    is in the probe list (with a probe, or named as lacking a builder: `probes.to_probe`)."""
    asked = to_probe(ops)
    passes_on_nothing, unasked = [], []
    for op, entry in sorted(ops.entries.items()):
        if entry.by_pattern:
            continue  # judged by the graph rules that cover its nodes; their silence is probed as rules
        standing = op_standing(op, ops)
        if standing.prediction == Prediction.PARSE and not standing.weighed:
            passes_on_nothing.append(op)
        if standing.prediction == Prediction.UNJUDGED and op_key(op) not in asked:
            unasked.append(op)
    assert (passes_on_nothing, unasked) == ([], [])


@pytest.mark.exports
def test_every_op_of_an_exporters_rebuilt_graph_has_an_entry(ops):
    from weftlib.rebuild import rebuilt

    named: dict[str, set[str]] = {}
    for network, built in rebuilt.rebuild_all().items():
        for op in op_types(onnx.load(str(built.path), load_external_data=False)):
            named.setdefault(op, set()).add(network)
    assert unlisted(named, ops) == {}
