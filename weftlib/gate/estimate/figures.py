"""The published figures the time estimate rests on, each with its source, in one place: the device link's
rate, the per-transfer overhead (no public measurement found: unknown, and left out of the sum, which the
estimate says), and the conventions that turn the suite's counts into the zoo's units.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..cut.merge import LINK


@dataclass(frozen=True)
class Figure:
    """One published figure: its value (None where no public source gives one), its unit and its source."""

    name: str
    value: float | None
    unit: str
    source: str

    @property
    def known(self) -> bool:
        return self.value is not None

    def text(self) -> str:
        shown = f"{self.value:.4g} {self.unit}" if self.value is not None else "unknown"
        return f"{self.name}: {shown} ({self.source})"


# The link: the Hailo-10H M.2 Key M module on up to four PCIe 3.0 lanes (`cut.merge.LINK`, whose rate the merge's
# crumb rule and 06's deployable table already use). 8 GT/s a lane with 128b/130b coding is 7.88 Gb/s, so 31.5
# Gb/s (3.94 GB/s) each way on four lanes, as Intel's PCIe IP user guides tabulate the Gen3 x4 link. A Raspberry
# Pi 5's AI HAT+ 2 gives the chip one lane: a quarter of this, so this is the best case.
LINK_RATE = Figure(
    name="host link",
    value=LINK.bytes_per_s,
    unit="B/s each way",
    source=f"{LINK.name}: {LINK.source}; the Gen3 x4 rate, 31.5 Gb/s each way, as tabulated in Intel's "
    "L-/H-tile Avalon-MM PCI Express user guide (683667, table 1)",
)

# No public measurement of HailoRT's fixed cost per transfer on the Hailo-10H was found (the nearest, a Hailo-8
# issue, times a whole Python inference call against the profiler's latency: hailo-ai/Hailo-Application-Code-
# Examples#272, 28 ms against 4.4 ms, which mixes the transfer with the API's own work). It is left unknown and
# out of the sum; each cut says how many transfers it makes, so a reader can add a figure of their own.
TRANSFER_OVERHEAD = Figure(
    name="overhead per transfer",
    value=None,
    unit="s",
    source="no public measurement for the Hailo-10H found; not in the sum (each cut counts its transfers)",
)

# The zoo's "OPS (G)" counts two operations per multiply-accumulate: mobilenet_v2_1.0 lists 0.62 G, and the
# MobileNetV2 paper gives it 300 M multiply-adds at 224x224. The suite counts MACs (`cut.coverage.node_macs`),
# so OPS = 2 x MACs.
OPS_PER_MAC = 2

ZOO = "the Hailo model zoo's hailo10h pages (FPS at batch 1, OPS, parameters, input resolution)"
