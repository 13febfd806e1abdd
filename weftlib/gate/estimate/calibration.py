"""The device model calibrated on the committed zoo (`params/model_zoo.yaml`, `record.zoo`): every hailo10h
network with its FPS at batch 1, its published operations, parameters and input resolution, each row citing
its page and the commit it was read at. The published figures are used for the calibration rows; the suite's
own counts (`graph_figures`) for the graphs it estimates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache

from ..record.zoo import REPOSITORY, FpsRow, ZooArch, fps_rows
from .device_model import Calibration, CalibrationRow, calibrate

ARCH = ZooArch.HAILO10H


def calibration_row(row: FpsRow) -> CalibrationRow:
    """One zoo row as the fit reads it, citing `repository/page@commit`."""
    return CalibrationRow(
        network=row.network,
        family=row.family,
        fps=row.fps_batch1,
        gops=row.ops_g,
        params_m=row.params_m,
        input_elements=math.prod(row.input_shape),
        source=f"{REPOSITORY}/{row.page}@{row.commit}",
    )


def zoo_rows(rows: Sequence[FpsRow] | None = None) -> tuple[CalibrationRow, ...]:
    """The calibration rows: `rows`, or every committed hailo10h row of the zoo."""
    return tuple(calibration_row(r) for r in (fps_rows(ARCH) if rows is None else rows))


@cache
def zoo_calibration() -> Calibration:
    """The device model on the committed zoo's hailo10h rows, held out by family (read and fitted once)."""
    return calibrate(zoo_rows())
