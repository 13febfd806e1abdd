"""The records of a cut: its segments (what runs on one side, and for a device segment the DFC's arguments),
its coverage (what share of the graph is on the device, what crosses per inference) and the proof's result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..predict.nodes import GraphPrediction
from ..vocabulary import Side

TOLERANCE = 1e-6  # onnxruntime, optimisations off, the same kernels on both sides: equal but for summation order


class HeldTo(StrEnum):
    """What a cut's chain of segments was held to (`proof.prove`)."""

    FRESH = "the graph run whole on random inputs"
    RECORDED = "a run of the same file recorded beside it, as written"  # its inputs fed the chain
    IDENTICAL = "nothing run: its one segment is the graph itself, read from both files (`same_graph`)"


@dataclass(frozen=True)
class Segment:
    """A part of the graph that runs on one side, in execution order."""

    index: int
    runs_on: Side
    nodes: tuple[str, ...]
    inputs: tuple[str, ...]  # tensors of the original graph that come from outside the segment
    outputs: tuple[str, ...]  # tensors it hands on (to a later segment, or as graph outputs)
    file: str = ""
    start_node_names: tuple[str, ...] = ()
    end_node_names: tuple[str, ...] = ()
    net_input_shapes: dict[str, list[int]] = field(default_factory=dict)
    largest_layer: dict[str, Any] = field(default_factory=dict)
    end_risks: tuple[str, ...] = ()  # end nodes the parser may absorb (InvalidHNError ... missing in the HN)


@dataclass(frozen=True)
class Coverage:
    """The share of the graph on the device, and what crosses between device and host per inference."""

    nodes: tuple[int, int]  # (on the device, in all)
    macs: tuple[int, int]
    params: tuple[int, int]
    crossings: int  # tensors entering or leaving a device segment
    bytes_crossing: int

    def share(self, what: str) -> float:
        on, total = getattr(self, what)
        return on / total if total else 0.0


@dataclass(frozen=True)
class Partition:
    """The segments of one graph, their coverage, and the proof once `prove` has run."""

    model: str
    segments: tuple[Segment, ...]
    coverage: Coverage
    moved_to_host: dict[str, str]  # node -> why it could have gone to the device and did not (judged cut out)
    max_abs_diff: float | None = None
    tolerance: float = TOLERANCE
    prediction: GraphPrediction | None = field(default=None, compare=False, repr=False)  # the whole graph's, cut from
    held_to: HeldTo | None = None  # what the proof held the chain to (None: not proven yet)
    held_to_note: str = ""  # where the recorded run lies, or why none was used

    @property
    def device_segments(self) -> tuple[Segment, ...]:
        return tuple(s for s in self.segments if s.runs_on == Side.DEVICE)

    @property
    def proven(self) -> bool:
        return self.max_abs_diff is not None and self.max_abs_diff <= self.tolerance

    def as_json(self) -> dict[str, Any]:
        segments = []
        for s in self.segments:
            row: dict[str, Any] = {
                "file": s.file,
                "runs_on": s.runs_on,
                "inputs": list(s.inputs),
                "outputs": list(s.outputs),
                "nodes": len(s.nodes),
            }
            if s.runs_on == Side.DEVICE:
                row.update(
                    start_node_names=list(s.start_node_names),
                    end_node_names=list(s.end_node_names),
                    net_input_shapes=s.net_input_shapes,
                    largest_layer=s.largest_layer,
                    end_risks=list(s.end_risks),
                )
            segments.append(row)
        c = self.coverage
        return {
            "model": self.model,
            "segments": segments,
            "max_abs_diff": self.max_abs_diff,
            "tolerance": self.tolerance,
            "proven": self.proven,
            "chain_held_to": {"reference": self.held_to, "note": self.held_to_note},
            "coverage": {
                "nodes": {"device": c.nodes[0], "total": c.nodes[1], "share": c.share("nodes")},
                "macs": {"device": c.macs[0], "total": c.macs[1], "share": c.share("macs")},
                "params": {"device": c.params[0], "total": c.params[1], "share": c.share("params")},
                "crossings": c.crossings,
                "bytes_crossing": c.bytes_crossing,
            },
            "moved_to_host": self.moved_to_host,
        }
