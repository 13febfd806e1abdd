"""How long work talks to the person running it: a progress bar that suits where the code runs.

The suite runner sets `WEFT_HEADLESS=1` for its kernels, so a notebook (and any package under it) can tell a
headless run from a person in JupyterLab without knowing about the runner.
"""

from __future__ import annotations

import os
import sys
from typing import Any

HEADLESS_ENV = "WEFT_HEADLESS"
HEADLESS_REDRAW_S = 20.0  # a headless bar's redraws: a few lines a minute in the run's log, none lost at the end


def headless() -> bool:
    """True when the suite runner executes the notebook (no one is looking at live widgets or servers)."""
    return os.environ.get(HEADLESS_ENV) == "1"


def progress(iterable: Any, **kwargs: Any) -> Any:
    """A tqdm progress bar that suits where the code runs.

    In JupyterLab a widget bar (tqdm.auto); under the suite runner a text bar on the cell's stderr, redrawn
    at most every `HEADLESS_REDRAW_S`: the executed notebook keeps its last state (how long the loop took) and
    the runner relays each redraw, with tqdm's estimate of the time left, to its log (`suite.progress`);
    under CI (plain log lines) none.
    """
    if headless():
        from tqdm import tqdm

        kwargs["disable"] = kwargs.get("disable", False) or bool(os.environ.get("CI"))
        return tqdm(iterable, file=sys.stderr, mininterval=HEADLESS_REDRAW_S, ncols=100, **kwargs)
    from tqdm.auto import tqdm

    return tqdm(iterable, **kwargs)
