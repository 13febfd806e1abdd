"""The public record of DFC runs, each outcome rebuilt as a small graph (`backtest` holds the gate to them).

Every `public_record` entry of `params/device_ops.yaml` with `rebuilt: true` has a builder here (`BUILDERS`):
the graph the record describes (at reduced size where the record's is large), its nodes named as
`refused_at` names them. The builders live in one module per topic, each marked `@case("<name>", ...)`
(`registry`), so a case is named once in the code.

A new topic is one step: write its module here, its builders marked with `@case`, and add its name to the import
below (importing a topic registers its cases).
"""

from __future__ import annotations

from . import clef, cnn, harness, language, pixal, qvl, rfdetr, wdtagger, yolo  # noqa: F401 (each registers its cases)
from .registry import BUILDERS, Build, case

__all__ = ["BUILDERS", "Build", "case"]
