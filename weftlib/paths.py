"""Where the suite's own files are: the checkout root and the scratch folder an interactive notebook writes to.

Every package finds `params/`, `notebooks/` and `outputs/` from here, so the layout is written down once.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRATCH = REPO_ROOT / "outputs" / "scratch"
