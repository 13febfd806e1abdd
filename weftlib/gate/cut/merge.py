"""Which device nodes share a compiled graph: device segments as few as acyclicity allows, and the crumbs a
device would not earn its transfers on, left to the host.

Each device segment is one compiled network (a HEF) and one round trip of tensors over the host link. The
partitioner places nodes on alternating levels (host, device, host, ...), each on the lowest level of its
side after all of its producers (`partition._levels`). Giving each device node the phase of its level, a
path between two device nodes raises the phase exactly when it runs through a host node, so the number of
device levels is the longest run of device-host-device alternations any path holds: no cut has fewer device
segments (two nodes that such a path joins can never share one). A level taken whole, its independent
branches included, leaves no path that goes out of it and comes back (any node between two nodes of one
level is of that level), so one segment per level is the fewest device segments, and no two can be merged
without a cycle: as onnxruntime's partitioner hands a provider the largest subgraphs it can run, and TVM's
region merging joins regions while no cycle forms. The DFC takes such a segment with several
`start_node_names` and `end_node_names`. The cut before this merge (the connected parts of each level,
`UNMERGED`) is kept, so notebook 06 can show both figures.

A crumb: a device segment without multiply-accumulates, or with fewer of them than elements it moves in and
out. The threshold, plainly: HailoRT quantizes every input element on the host and dequantizes every output
element there (one multiply-add each, its virtual streams' host-side transformations), so a segment doing
fewer MACs than the elements it moves saves the host less arithmetic than its transfers already cost it,
before the link (`LINK`) adds its time. A crumb goes to the host, unless the whole graph holds no MACs
(then nothing in it would pay, and the cut shows what parses).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import onnx

from ...onnx_core.walk import Graph
from ..vocabulary import Side
from .coverage import node_macs, static_dims
from .segments import Segment


@dataclass(frozen=True)
class CutRule:
    """How the cut groups device nodes: `merge` joins what no host path separates (else each level splits into
    its connected parts, the cut before the merge); `crumbs_to_host` leaves crumbs on the host."""

    merge: bool = True
    crumbs_to_host: bool = True


MERGED = CutRule()
UNMERGED = CutRule(merge=False, crumbs_to_host=False)  # the cut as it was: 637 device segments in the appendix


@dataclass(frozen=True)
class HostLink:
    """The device's link to the host and its rated compute, as published: what a tensor crossing costs."""

    name: str
    bytes_per_s: float
    macs_per_s: float
    source: str

    def seconds(self, nbytes: int) -> float:
        return nbytes / self.bytes_per_s


# PCIe 3.0: 8 GT/s a lane, 128b/130b coding, so 0.985 GB/s a lane and direction; the Hailo-10H M.2 Key M
# module takes up to 4 lanes (a Raspberry Pi 5's AI HAT+ 2 gives it one, at PCIe 2.0 unless set to 3.0), so
# this is the best case. Compute: 40 TOPS INT4 = 20 TOPS INT8 = 1e13 MAC/s. The crumb threshold rests on
# neither (it counts the host's own work per element moved); these only turn a cut's figures into time.
LINK = HostLink(
    name="Hailo-10H M.2, PCIe 3.0 x4",
    bytes_per_s=4 * 8e9 * 128 / 130 / 8,
    macs_per_s=20e12 / 2,
    source="Hailo's Hailo-10H launch figures (40 TOPS INT4, 20 TOPS INT8; The Register, 2024-04-10) and the "
    "PCIe 3.0 line rate",
)


# ------------------------------------------------------------------------------------------ grouping


def components(members: list[int], nodes: list[onnx.NodeProto]) -> list[list[int]]:
    """The connected parts of one level (nodes linked by a tensor one makes and another reads)."""
    parent = {i: i for i in members}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    made = {t: i for i in members for t in nodes[i].output if t}
    for i in members:
        for t in nodes[i].input:
            if t in made:
                parent[root(i)] = root(made[t])
    groups: dict[int, list[int]] = {}
    for i in members:
        groups.setdefault(root(i), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def latest_levels(nodes: list[onnx.NodeProto], side: dict[str, Side]) -> list[int]:
    """Per node, the highest level of its side below all of its consumers': `partition._levels` mirrored, so
    each node runs as late as the host allows (same levels in number, nodes in topological order)."""
    consumers: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        for t in n.input:
            consumers.setdefault(t, []).append(i)
    top = 2 * len(nodes) + 1  # odd: a device level above any a path can climb to
    levels = [0] * len(nodes)
    for i in reversed(range(len(nodes))):
        ceiling = min((levels[c] for t in nodes[i].output for c in consumers.get(t, [])), default=top)
        want = 1 if side[nodes[i].name] == Side.DEVICE else 0
        levels[i] = ceiling if ceiling % 2 == want else ceiling - 1
    return levels


def _by_level(levels: list[int]) -> list[list[int]]:
    return [[i for i, lv in enumerate(levels) if lv == level] for level in sorted(set(levels))]


def crossing(groups: list[list[int]], nodes: list[onnx.NodeProto], side: dict[str, Side], graph: Graph) -> float:
    """Elements that enter or leave the device groups of `groups` per inference."""
    outputs = {o.name for o in graph.model.graph.output}
    readers: dict[str, set[int]] = {}
    for i, n in enumerate(nodes):
        for t in n.input:
            readers.setdefault(t, set()).add(i)
    moved: list[str] = []
    for g in groups:
        if side[nodes[g[0]].name] != Side.DEVICE:
            continue
        inside, made = set(g), {t for i in g for t in nodes[i].output if t}
        moved += {t for i in g for t in nodes[i].input if t and t not in made and t not in graph.constants}
        moved += [t for t in made if t in outputs or readers.get(t, set()) - inside]
    return elements(graph, moved)


def groups(
    nodes: list[onnx.NodeProto], side: dict[str, Side], levels: list[int], rule: CutRule, graph: Graph
) -> list[list[int]]:
    """The segments' node indices in execution order. Merged: one per level, the levels of `levels` (each
    node as early as the host allows) or of `latest_levels`, whichever moves fewer elements (a node that
    only a later device level reads then runs there, instead of crossing out and back in); else each level of
    `levels` split into its connected parts."""
    if not rule.merge:
        return [part for members in _by_level(levels) for part in components(members, nodes)]
    early, late = _by_level(levels), _by_level(latest_levels(nodes, side))
    return min((early, late), key=lambda g: crossing(g, nodes, side, graph))


# -------------------------------------------------------------------------------------------- crumbs


def elements(graph: Graph, tensors: Sequence[str]) -> float:
    """Elements the tensors hold; infinite when one has a dimension only the run knows (NonZero's output),
    so a grouping that moves it loses to one that does not, and a segment that moves it counts as a crumb."""
    shapes = [graph.shapes.get(t) or (0,) for t in tensors]
    if any(d is None for shape in shapes for d in shape):
        return math.inf
    return sum(math.prod(static_dims(shape)) for shape in shapes)


def segment_macs(segment: Segment, by_name: dict[str, onnx.NodeProto], graph: Graph) -> int:
    return sum(node_macs(by_name[n], graph) for n in segment.nodes)


def crumbs(segments: Sequence[Segment], graph: Graph) -> list[tuple[Segment, int, float]]:
    """(segment, its MACs, elements it moves) for every device segment that would not pay for its transfers;
    none when the whole graph holds no MACs."""
    by_name = {n.name: n for n in graph.model.graph.node}
    if not any(node_macs(n, graph) for n in by_name.values()):
        return []
    found = []
    for s in segments:
        if s.runs_on != Side.DEVICE:
            continue
        macs, moved = segment_macs(s, by_name, graph), elements(graph, [*s.inputs, *s.outputs])
        if macs == 0 or macs < moved:
            found.append((s, macs, moved))
    return found


def crumbs_to_host(segments: Sequence[Segment], graph: Graph, side: dict[str, Side], moved: dict[str, str]) -> bool:
    """Send every crumb's nodes to the host (`side`, with why in `moved`); whether any went."""
    found = crumbs(segments, graph)
    for s, macs, elems in found:
        for name in s.nodes:
            side[name] = Side.HOST
            moved[name] = f"a crumb: its segment's {macs:,} MACs do not pay for the {elems:,} elements it moves"
    return bool(found)


# ----------------------------------------------------------------------------------- the merge check


def _acyclic(vertices: set[int], edges: set[tuple[int, int]]) -> bool:
    indegree = dict.fromkeys(vertices, 0)
    out: dict[int, list[int]] = {v: [] for v in vertices}
    for a, b in edges:
        out[a].append(b)
        indegree[b] += 1
    ready = [v for v, d in indegree.items() if d == 0]
    seen = 0
    while ready:
        v = ready.pop()
        seen += 1
        for w in out[v]:
            indegree[w] -= 1
            if indegree[w] == 0:
                ready.append(w)
    return seen == len(vertices)


def quotient_acyclic(nodes: Sequence[onnx.NodeProto], group: dict[str, int]) -> bool:
    """Whether the graph with each group contracted to one vertex (a node without a group stays itself) has no
    cycle: the groups can then run one after the other, each as one piece."""
    names = [n.name for n in nodes]
    vertex = {name: group.get(name, len(nodes) + i) for i, name in enumerate(names)}
    made = {t: vertex[n.name] for n in nodes for t in n.output if t}
    edges = {(made[t], vertex[n.name]) for n in nodes for t in n.input if t in made}
    return _acyclic(set(vertex.values()), {(a, b) for a, b in edges if a != b})


def mergeable_pairs(segments: Sequence[Segment], nodes: Sequence[onnx.NodeProto]) -> list[tuple[int, int]]:
    """Pairs of device segments (by index) that could be merged without a cycle, host nodes taken one by one
    (the freest the host can be): none when the cut is maximal."""
    device = [s for s in segments if s.runs_on == Side.DEVICE]
    base = {n: s.index for s in device for n in s.nodes}
    pairs = []
    for i, a in enumerate(device):
        for b in device[i + 1 :]:
            joined = {n: (a.index if g == b.index else g) for n, g in base.items()}
            if quotient_acyclic(nodes, joined):
                pairs.append((a.index, b.index))
    return pairs
