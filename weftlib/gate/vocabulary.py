"""The gate's words, each a closed vocabulary: what a prediction, a verdict, a pairing or an outcome may be.

Every value is the string the records already hold (`StrEnum`: a member equals its text, so JSON, YAML, tables
and the published records read as before). This module imports nothing: the DFC image carries it with
`dfc_runner` and `dfc_log`.
"""

from __future__ import annotations

from enum import StrEnum


class Prediction(StrEnum):
    """What the gate predicts the DFC's parser does with one node, one op or one graph rule."""

    PARSE = "parse"
    REFUSED = "refused"
    UNJUDGED = "unjudged"  # the record is silent or split: a probe settles it


class GateVerdict(StrEnum):
    """The device gate's verdict on a whole file (its exit code: `device.EXIT_CODES`)."""

    PASS = "pass"
    FAIL = "fail"
    UNJUDGED = "unjudged"


class ProofVerdict(StrEnum):
    """What `gate fix`'s proof found of a fixed graph against its original (`fix.proof`)."""

    PROVEN = "proven"  # every output proven by a finite set, every rewritten node reached, no set differs
    NOT_EQUAL = "NOT equal"  # a set on which the two differ (or the fixed graph cannot run what the original runs)
    UNJUDGED = "unjudged"  # nothing differs, but an output no set proved, a rewritten node no set ran, or no set
    INVALID = "invalid"  # the fixed graph fails the ONNX checker at the original's IR and opset: never run
    NO_REWRITE = "no rewrite"  # the fixed graph is the original: nothing to prove, nothing offered


class DfcVerdict(StrEnum):
    """What the DFC's parser did with a graph, read from its own output."""

    PARSED = "parsed"  # translated and a HAR written
    REJECTED = "rejected"
    UNRECOGNISED = "unrecognised"  # neither: an output the reader does not know (never a pass)


class FailureCause(StrEnum):
    """Why a DFC rejection happened, as far as its text tells."""

    OPERATOR = "operator"  # an operator (or its pattern) was refused
    BEFORE_OPERATORS = "before operators"  # the parser stopped before reading any operator (inputs, formats)
    INCONCLUSIVE = "inconclusive"  # a failure whose text names no cause


class Seen(StrEnum):
    """What a piece of evidence in the public record is: an observation of the DFC, or its documentation."""

    PARSED = "parsed"  # the DFC was seen to parse it
    REJECTED = "rejected"  # seen to refuse it (a crash in the parser counts as rejected)
    MISCOMPILED = "miscompiled"  # parsed, but not computed as written (counted against)
    DOCUMENTED = "documented"  # a vendor table lists it as supported
    ASSUMED = "assumed"  # nothing was seen: an entry's `evidence: assumed` (never an item's word in the file)


OBSERVED = frozenset({Seen.PARSED, Seen.REJECTED, Seen.MISCOMPILED})
"""The kinds of evidence that are observations of a DFC run (documentation is not)."""


class Listing(StrEnum):
    """Where `params/device_ops.yaml` lists an entry: its section's name (an op entry, or a graph rule)."""

    DEVICE_OPS = "device_ops"  # an op the device half may use
    KNOWN_BLOCKERS = "known_blockers"  # an op named as refused, with its reason
    GRAPH_RULES = "graph_rules"  # a rule of `predict.rules`


class Outcome(StrEnum):
    """What happened to one case of the public record (a rebuilt graph's recorded outcome)."""

    PARSED = "parsed"
    REFUSED = "refused"
    CRASHED = "crashed"
    MISCOMPILED = "miscompiled"


class Stage(StrEnum):
    """How far through the DFC a recorded run went."""

    TRANSLATE = "translate"
    OPTIMIZE = "optimize"
    COMPILE = "compile"
    RAN = "ran"


class Reach(StrEnum):
    """How near a piece of evidence is to the target DFC and arch."""

    TARGET = "target"  # the target's DFC version and arch
    SIBLING = "sibling"  # another DFC of the same major, same arch or unstated
    OFF = "off"  # another major or another arch: shown, never weighed


class Agreement(StrEnum):
    """A backtest case: the gate's prediction against the recorded outcome."""

    AGREES = "agrees"
    DISAGREES = "disagrees"
    UNJUDGED = "unjudged"


class PairVerdict(StrEnum):
    """The pair's verdict on one graph: the gate's prediction read against the DFC's result (`Pairing.verdict`
    of `compiler.pairing`, whose record takes the plain name)."""

    HELD = "allowlist held"
    TOO_GENEROUS = "DEVICE_OPS too generous"
    TOO_STRICT = "DEVICE_OPS too strict"
    BOTH_REJECT = "both reject"
    OBSERVED_NOW = "unjudged prediction, now observed"
    NOT_RUN = "DFC not run"
    UNRECOGNISED = "DFC unrecognised"
    UNJUDGED_INPUTS = "ops unjudged: the DFC stopped before reading any operator"
    UNJUDGED_INCONCLUSIVE = "ops unjudged: inconclusive DFC failure"
    FOREIGN_RESULT = "DFC result refused: about another model"
    UNMATCHED = "DFC result not paired: it names no model"


UNJUDGED_PAIR_VERDICTS = frozenset(
    {
        PairVerdict.NOT_RUN,
        PairVerdict.UNRECOGNISED,
        PairVerdict.UNJUDGED_INPUTS,
        PairVerdict.UNJUDGED_INCONCLUSIVE,
        PairVerdict.FOREIGN_RESULT,
        PairVerdict.UNMATCHED,
    }
)
"""The pair verdicts that judge nothing: no DFC verdict to read the prediction against."""


class EditAction(StrEnum):
    """What a pairing (or the listing's own evidence) asks of an entry of `params/device_ops.yaml`."""

    MOVE_OUT = "move out"  # out of device_ops: the DFC refused it
    MOVE_IN = "move in"  # into device_ops (or the parse added to its rule): the DFC parsed it
    ADD_EVIDENCE = "add evidence"  # an unjudged entry, now observed
    REVIEW = "review"  # a node the DFC named that the graph lacks, or a failure naming no op


class Subject(StrEnum):
    """What a standing, a probe or an edit is about: an op entry or a graph rule."""

    OP = "op"
    RULE = "rule"


class Side(StrEnum):
    """Where a segment of a cut graph runs."""

    DEVICE = "device"
    HOST = "host"


class FolderKind(StrEnum):
    """The kinds of folder the gate writes, as their marker names them (`folder_swap`)."""

    PARTITION = "partition"
    FIX = "fix"
    DFC_PACK = "DFC pack"
    PROBE_PACK = "probe pack"


class DfcSource(StrEnum):
    """Where a run's DFC results came from (`compiler.results.collect_dfc`)."""

    RESULTS_DIR = "results_dir"  # a folder of result files the user gave
    PARSER = "parser"  # the DFC ran here
    NOT_RUN = "not run"


class DfcWord(StrEnum):
    """The DFC's side of a pairing, in the pairing table's words (`compiler.pairing.Pairing.dfc`)."""

    NOT_RUN = "not run"
    PARSES = "parses"
    REJECTS = "rejects"
    UNRECOGNISED = "unrecognised"


class SegmentVerdict(StrEnum):
    """What the DFC did with one device segment parsed as its cut."""

    NOT_RUN = "not run"
    PARSED = "parsed"
    REJECTED = "rejected"  # on an operator: its nodes go to the host
    UNJUDGED = "unjudged"  # a failure before any operator, or inconclusive: nothing moves


class Exporter(StrEnum):
    """The packaged exporters a zoo network's source may name (`record.zoo`); any other source names none."""

    ULTRALYTICS = "ultralytics"
    TIMM = "timm"
    TORCHVISION = "torchvision"
    TRANSFORMERS = "transformers"


class ZooField(StrEnum):
    """Where a zoo network's source URL was read: its config's keys, or the page's S link."""

    INFO_SOURCE = "config info.source"
    PAGE_LINK = "page S link"


class PaysOff(StrEnum):
    """Whether a cut's device estimate plus transfers plus host segments beats the host alone
    (`gate.estimate.payoff`): judged on the estimate's band, never on its middle alone."""

    YES = "yes"  # the slow end of the band is still faster than the host alone
    NO = "no"  # the fast end of the band is still slower
    WITHIN_ERROR = "within the error"  # the host alone lies inside the band
    CONTENDED = "not judged: contended"  # the host's times were taken while other work held the cores
    NO_DEVICE = "nothing on the device"  # the cut has no device segment


class GraphKind(StrEnum):
    """What an exported graph is, as its exporter wrote it in the graph's parity file (`run_graphs.GraphIdentity`):
    the gate fixes the faithful graphs and sets each beside its variants, never guessing from a file name."""

    FAITHFUL = "faithful"  # the model as written, or natten or the sparse convolution swapped for a formulation
    VARIANT = "variant"  # an exact rewrite by hand of a faithful graph: a layout, a NAF variant, DiT's tokens+<change>
    FIXED = "fixed"  # `gate fix`'s exact rewrite of a graph, proven equal to it


class GraphNotebook(StrEnum):
    """The notebooks whose graphs the gate reads (05, 06), each named once for the identity its exports write."""

    ATTENTION = "02_export_attention"
    SPARSE = "03_sparse_conv_memory"
    DIT = "04_export_dit_block"
