"""What a notebook records, and what the run index says about the machine it ran on.

A notebook makes one `Recorder` and passes every value it asserts through `record`, so the run index and the
tests read numbers from `metrics.json` instead of scraping printed text. `metrics.json` is rewritten on every
call, so a notebook that fails half-way still leaves what it had measured.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRATCH = REPO_ROOT / "outputs" / "scratch"
HEADLESS_ENV = "WEFT_HEADLESS"
TRACKED_PACKAGES = ("torch", "natten", "onnx", "onnxruntime", "onnxscript", "papermill", "nbconvert")


def headless() -> bool:
    """True when the suite runner executes the notebook (no one is looking at live widgets or servers)."""
    return os.environ.get(HEADLESS_ENV) == "1"


def jsonable(value: Any) -> Any:
    """Turn numpy/torch scalars and arrays, dataclasses, paths, sets and tuples into plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [jsonable(v) for v in items]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "to_dict") and hasattr(value, "columns"):  # pandas DataFrame
        return jsonable(value.to_dict(orient="records"))
    if hasattr(value, "tolist"):  # numpy / torch
        return jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


class Recorder:
    """Collects one notebook's asserted values in `<run_dir>/<name>/metrics.json` next to its artefacts.

    `run_dir` is the notebook's `run_dir` parameter: the suite runner sets it; left empty (an interactive
    session) the artefacts go to `outputs/scratch/`.
    """

    def __init__(self, name: str, run_dir: str | os.PathLike = "") -> None:
        self.name = name
        self.run_dir = Path(run_dir) if str(run_dir) else SCRATCH
        self.dir = self.run_dir / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.metrics: dict[str, Any] = {}
        self.headline: list[str] = []
        self.display: dict[str, dict[str, Any]] = {}
        _full_width_tables()

    def record(self, key: str, value: Any, *, headline: bool = False, label: str | None = None,
               unit: str | None = None, digits: int | None = None, table: bool = False) -> Any:
        """Store `value` under `key` (shown in the run index when `headline`) and return it unchanged.

        A headline is read by people: `label` names it (default: the key in words), `unit` says what the
        number counts ("B" for bytes, "s" for seconds, "x" for a ratio, any other unit is printed as given)
        and `digits` the significant digits (default 3); see `format_value`. `table` marks a record table
        (a DataFrame or list of rows) as one of the notebook's key tables for the RFD page.
        """
        self.metrics[key] = jsonable(value)
        if headline and key not in self.headline:
            self.headline.append(key)
        shown = {k: v for k, v in (("label", label), ("unit", unit), ("digits", digits),
                                             ("table", table or None)) if v is not None}
        if shown:
            self.display[key] = shown
        self._write()
        return value

    def describe(self, key: str, *, label: str | None = None, unit: str | None = None,
                 digits: int | None = None, table: bool | None = None) -> None:
        """Say how an already recorded value reads (label, unit, digits, key table; see `record`) without
        re-recording it."""
        if key not in self.metrics:
            raise KeyError(f"describe: nothing recorded under {key!r}")
        self.display.setdefault(key, {}).update(
            {k: v for k, v in (("label", label), ("unit", unit), ("digits", digits), ("table", table))
             if v is not None})
        self._write()

    def demote(self, key: str, reason: str) -> None:
        """Take `key` out of the headline figures and the RFD page's key tables (it stays recorded) and record
        why: e.g. a speed ratio measured on millisecond calls at CI size is noise, not a finding."""
        if key in self.headline:
            self.headline.remove(key)
        self.display.setdefault(key, {})["not_headline"] = reason
        self._write()

    def conclude(self, answer: str, *, rests_on: dict[str, str], unmet: Sequence[str] = ()) -> dict[str, Any]:
        """Record the notebook's answer to its RFD question, in one sentence, for the run's answer table.

        `rests_on` says what the answer stands on (keys such as `sources`: "real checkout" | "stand-in",
        `natten`, `dfc`, `geometry`), so a reader sees at once whether it was the full-size appendix, the real
        code and the real compiler. `unmet` names each precondition that was not met (e.g. "DFC not run:
        needs the weftspun-hailo-dfc:5.3.0 image"): a silent skip would read like a pass, so any entry there
        makes the row "unanswered" (see `answer_status`).
        """
        if not answer.strip():
            raise ValueError("conclude: the answer is empty")
        conclusion = {"answer": answer.strip(), "rests_on": dict(rests_on), "unmet": list(unmet)}
        conclusion["status"] = answer_status(conclusion)
        self.record("conclusion", conclusion)
        return conclusion

    def path(self, filename: str) -> Path:
        """Where an artefact of this notebook goes (ONNX files, plots, tables)."""
        return self.dir / filename

    def savefig(self, fig: Any, filename: str) -> Path:
        """Save a matplotlib figure as an artefact next to the metrics, plus an SVG twin (same stem).

        The SVG is what `publish --rfd` inlines (the RFD repository publishes figures as inline SVG): text
        stays text and the file carries no date or random ids, so the same figure gives the same bytes.
        """
        import matplotlib

        target = self.path(filename)
        fig.savefig(target, dpi=110, bbox_inches="tight")
        if target.suffix.lower() != ".svg":
            with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": self.name}):
                fig.savefig(target.with_suffix(".svg"), bbox_inches="tight", metadata={"Date": None})
        return target

    def sibling(self, name: str) -> Path:
        """The artefact folder of another notebook in the same run (notebook 04 reads 02's and 03's)."""
        return self.run_dir / name

    def _write(self) -> None:
        payload = {"notebook": self.name, "headline": self.headline, "metrics": self.metrics}
        if self.display:
            payload["display"] = self.display
        tmp = self.dir / "metrics.json.tmp"
        tmp.write_text(json.dumps(payload, indent=2, sort_keys=False))
        tmp.replace(self.dir / "metrics.json")


def _full_width_tables() -> None:
    """Published tables show whole cells: pandas' default cuts text at 50 characters with '...', which made
    call chains and docker commands unreadable and uncopyable. A notebook may still narrow it afterwards."""
    try:
        import pandas as pd
    except ImportError:
        return
    pd.set_option("display.max_colwidth", None)


def answer_status(conclusion: dict[str, Any]) -> str:
    """"answered", "answered on a stand-in", or "unanswered: <each unmet precondition>"."""
    if conclusion.get("unmet"):
        return "unanswered: " + "; ".join(conclusion["unmet"])
    if conclusion.get("rests_on", {}).get("sources") == "stand-in":
        return "answered on a stand-in"
    return "answered"


def load_metrics(run_dir: str | os.PathLike, name: str) -> dict[str, Any]:
    """Read back what a notebook recorded; an empty record when it wrote nothing."""
    path = Path(run_dir) / name / "metrics.json"
    if not path.exists():
        return {"notebook": name, "headline": [], "metrics": {}}
    return json.loads(path.read_text())


def package_versions(names: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str | None]:
    """Installed distribution versions (None for a package that is not installed)."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_state(root: Path = REPO_ROOT) -> dict[str, Any]:
    """Commit and dirtiness of the checkout the suite runs from (None outside a git checkout)."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def natten_backends() -> dict[str, Any]:
    """Whether natten imports, and whether it carries libnatten (its CUDA kernels) or only the Flex path."""
    info: dict[str, Any] = {"installed": False, "libnatten": False, "cuda": False, "note": ""}
    try:
        natten = importlib.import_module("natten")
    except Exception as exc:  # a broken build is evidence too
        info["note"] = f"natten does not import: {exc!r}"
        return info
    import torch

    info["installed"] = True
    info["version"] = getattr(natten, "__version__", None)
    info["libnatten"] = bool(getattr(natten, "HAS_LIBNATTEN", False))
    info["cuda"] = torch.cuda.is_available()
    info["note"] = (
        "CUTLASS kernels available" if info["libnatten"] and info["cuda"]
        else "no libnatten/CUDA: only the Flex backend (dense attention with a mask) can run here"
    )
    return info


def hailo_dfc() -> dict[str, Any]:
    """Whether the Hailo Dataflow Compiler's Python client imports here (Linux x86-64 in its image only)."""
    try:
        module = importlib.import_module("hailo_sdk_client")
    except Exception as exc:
        return {"importable": False, "reason": f"{type(exc).__name__}: {exc}"}
    return {"importable": True, "version": getattr(module, "__version__", None)}


def machine() -> dict[str, Any]:
    """CPU, memory and accelerator of this machine, as evidence for every timing in the appendix."""
    import psutil
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "ram_bytes": psutil.virtual_memory().total,
        "python": platform.python_version(),
        "gpu": gpu,
    }


def environment() -> dict[str, Any]:
    """Everything notebook 00 reports and the run index records as provenance."""
    return {
        "versions": package_versions(),
        "machine": machine(),
        "natten": natten_backends(),
        "hailo_dfc": hailo_dfc(),
        "git": git_state(),
    }


def pinned_versions(pyproject: Path = REPO_ROOT / "pyproject.toml") -> dict[str, str]:
    """The `==` pins of pyproject.toml, so a notebook can show that it ran on what the project declares."""
    import tomllib

    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return {d.split("==")[0].strip(): d.split("==")[1].strip() for d in deps if "==" in d}


def capabilities(env: dict[str, Any], appendix_ram_gib: float) -> list[dict[str, str]]:
    """Which notebook can run fully on this machine, and what is missing for the parts that cannot."""
    natten_native = env["natten"]["libnatten"] and env["natten"]["cuda"]
    dfc = env["hailo_dfc"]["importable"]
    ram_gib = env["machine"]["ram_bytes"] / 2**30
    rows = [
        ("01_trace_natten", True, "full: the trace needs no CUDA; natten's own call fails on CPU as it would"
         + ("" if not natten_native else " (here it runs: libnatten + CUDA present)")),
        ("02_export_attention", True, "full: equality against natten's Flex backend, export and onnxruntime"
         + (" (plus natten's CUTLASS path)" if natten_native else "")),
        ("03_sparse_conv_memory", ram_gib >= appendix_ram_gib,
         f"{ram_gib:.0f} GiB RAM; the 1024 appendix run wants about {appendix_ram_gib:.0f} GiB"),
        ("04_gate_pairing", dfc, "device gate runs anywhere; the DFC parse "
         + ("runs here" if dfc else "needs the weftspun-hailo-dfc Docker image (Linux x86-64)")),
    ]
    return [{"notebook": n, "fully here": "yes" if ok else "partly", "why": why} for n, ok, why in rows]


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


# ---- headline figures for people -------------------------------------------------------------------------

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
_BYTE_STEPS = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def _number(x: float, digits: int = 3) -> str:
    """`x` to `digits` significant digits, without exponent for everyday magnitudes."""
    if x == 0:
        return "0"
    if not math.isfinite(x):
        return str(x)
    if isinstance(x, int) or (float(x).is_integer() and abs(x) < 1e15):
        return f"{int(x):,}"
    if 1e-3 <= abs(x) < 1e6:
        text = f"{x:.{digits}g}"
        rounded = float(text)
        return f"{int(rounded):,}" if rounded.is_integer() and abs(rounded) >= 1000 else text
    mantissa, exponent = f"{x:.{max(digits - 1, 0)}e}".split("e")
    return f"{mantissa} × 10{str(int(exponent)).translate(_SUPERSCRIPT)}"


def format_value(value: Any, unit: str | None = None, digits: int = 3) -> str:
    """A recorded value as a person reads it: rounded, with its unit, lists and mappings spelled out.

    Units: "B" bytes (shown in KiB/MiB/GiB), "s" seconds (ms below one second, min above two minutes),
    "x" a ratio ("2.4×"), "%" a percentage; any other unit is appended as given.
    """
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if unit == "B":
            for name, size in _BYTE_STEPS:
                if abs(value) >= size:
                    return f"{_number(value / size, digits)} {name}"
            return f"{_number(value, digits)} B"
        if unit == "s":
            if abs(value) < 1:
                return f"{_number(value * 1000, digits)} ms"
            if abs(value) >= 120:
                return f"{_number(value / 60, digits)} min"
            return f"{_number(value, digits)} s"
        if unit == "x":
            return f"{_number(value, digits)}×"
        if unit == "%":
            return f"{_number(value, digits)} %"
        text = _number(value, digits)
        return f"{text} {unit}" if unit else text
    if isinstance(value, str):
        return f"{value} {unit}" if unit else value
    if isinstance(value, dict):
        if not value:
            return "none"
        return "; ".join(f"{k}: {format_value(v, unit, digits)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        if not value:
            return "none"
        return ", ".join(format_value(v, unit, digits) for v in value)
    return str(value)


def label_of(key: str) -> str:
    """A key in words: `headline_dense_bytes` -> `headline dense bytes`."""
    return key.replace("_", " ").strip()


def headlines(recorded: dict[str, Any]) -> list[dict[str, str]]:
    """The headline figures of one notebook's metrics.json, each as {key, label, text}, in recording order."""
    shown = recorded.get("display", {})
    rows = []
    for key in recorded.get("headline", []):
        how = shown.get(key, {})
        value = recorded.get("metrics", {}).get(key)
        rows.append({"key": key, "label": how.get("label") or label_of(key),
                     "text": format_value(value, how.get("unit"), how.get("digits", 3))})
    return rows
