"""How long work talks to the person running it: a progress bar that suits where the code runs.

The suite runner sets `WEFT_HEADLESS=1` for its kernels, so a notebook (and any package under it) can tell a
headless run from a person in JupyterLab without knowing about the runner.
"""

from __future__ import annotations

import os
import sys
from typing import Any

HEADLESS_ENV = "WEFT_HEADLESS"


def headless() -> bool:
    """True when the suite runner executes the notebook (no one is looking at live widgets or servers)."""
    return os.environ.get(HEADLESS_ENV) == "1"


def progress(iterable: Any, **kwargs: Any) -> Any:
    """A tqdm progress bar that suits where the code runs.

    In JupyterLab a widget bar (tqdm.auto); under the suite runner the bar goes to the terminal that started
    the run (the kernel's own stderr), not into the published page; under CI (plain log lines) none.
    """
    if headless():
        from tqdm import tqdm

        kwargs["disable"] = kwargs.get("disable", False) or bool(os.environ.get("CI"))
        return tqdm(iterable, file=sys.__stderr__, mininterval=5.0, **kwargs)
    from tqdm.auto import tqdm

    return tqdm(iterable, **kwargs)
