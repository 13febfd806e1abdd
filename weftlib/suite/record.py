"""What a notebook records: the values it asserts, its conclusion, and how those read as headline figures.

A notebook makes one `Recorder` and passes every value it asserts through `record`, so the run index and the
tests read numbers from `metrics.json` instead of scraping printed text. `metrics.json` is rewritten on every
call, so a notebook that fails half-way still leaves what it had measured. A notebook of the suite records only
what its model declares (`models.model_of`), each value of its declared kind and unit: anything else is a
`RecordError` naming the key, raised before anything is written.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .. import metrics_file
from ..formatting import MAX_ANSWER_WORDS, format_value, word_count
from ..measure import Claim
from ..notebook_model import Metric, NotebookModel
from ..paths import SCRATCH
from ..workers import map_forked
from . import shown_tables
from .files import write_atomic
from .models import model_of


def jsonable(value: Any) -> Any:  # noqa: PLR0911 - one return per kind of value
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


class RecordError(ValueError):
    """A record its notebook's model does not allow: an undeclared key, a value of another kind, another unit."""


class Recorder:
    """Collects one notebook's asserted values in `<run_dir>/<name>/metrics.json` next to its artefacts.

    `run_dir` is the notebook's `run_dir` parameter: the suite runner sets it; left empty (an interactive
    session) the artefacts go to `outputs/scratch/`. A notebook of the suite is held to its model (`model`,
    from `models.model_of`); another name (a scratch notebook) records freely.
    """

    def __init__(self, name: str, run_dir: str | os.PathLike = "") -> None:
        self.name = name
        self.model: NotebookModel | None = model_of(name)
        self.run_dir = Path(run_dir) if str(run_dir) else SCRATCH
        self.dir = self.run_dir / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.metrics: dict[str, Any] = {}
        self.headline: list[str] = []
        self.display: dict[str, dict[str, Any]] = {}
        _full_width_tables()
        shown_tables.install()  # tables on the page: "—" for absent values, numbers written one way

    def record(
        self,
        key: str,
        value: Any,
        *,
        headline: bool = False,
        label: str | None = None,
        unit: str | None = None,
        digits: int | None = None,
        table: bool = False,
    ) -> Any:
        """Store `value` under `key` (shown in the run index when `headline`) and return it unchanged.

        A headline is read by people: `label` names it (default: the key in words), `unit` says what the
        number counts ("B" for bytes, "s" for seconds, "x" for a ratio, any other unit is printed as given)
        and `digits` the significant digits (default 3); see `format_value`. `table` marks a record table
        (a DataFrame or list of rows) as one of the notebook's key tables for the RFD page. The model's label
        and unit stand where none is given; a value, or a unit, the model does not allow is a `RecordError`.
        """
        metric = self._declared(key)
        stored = jsonable(value)
        if metric is not None:
            why = metric.problem(stored)
            if why:
                raise RecordError(f"{self.name}: the value recorded under {key!r} {why} ({self.model_text})")
            self._check_unit(metric, unit)
            label, unit = label or metric.label or None, unit or metric.unit
        self.metrics[key] = stored
        if headline and key not in self.headline:
            self.headline.append(key)
        shown = {
            k: v
            for k, v in (("label", label), ("unit", unit), ("digits", digits), ("table", table or None))
            if v is not None
        }
        if shown:
            self.display[key] = shown
        self._write()
        return value

    def describe(
        self,
        key: str,
        *,
        label: str | None = None,
        unit: str | None = None,
        digits: int | None = None,
        table: bool | None = None,
    ) -> None:
        """Say how an already recorded value reads (label, unit, digits, key table; see `record`) without
        re-recording it."""
        if key not in self.metrics:
            raise KeyError(f"describe: nothing recorded under {key!r}")
        metric = self._declared(key)
        if metric is not None:
            self._check_unit(metric, unit)
        self.display.setdefault(key, {}).update(
            {k: v for k, v in (("label", label), ("unit", unit), ("digits", digits), ("table", table)) if v is not None}
        )
        self._write()

    def demote(self, key: str, reason: str) -> None:
        """Take `key` out of the headline figures and the RFD page's key tables (it stays recorded) and record
        why: e.g. a speed ratio measured on millisecond calls at CI size is noise, not a finding."""
        self._declared(key)
        if key in self.headline:
            self.headline.remove(key)
        self.display.setdefault(key, {})["not_headline"] = reason
        self._write()

    def claims(self, claims: Iterable[Claim]) -> list[Claim]:
        """Record how claims about time or memory were judged (`measure.claims`) under `claims`, by name (a
        claim judged again replaces its record), and return them: the run index says which claims were
        judged and which were not. The notebook still asserts them (`measure.failed`)."""
        claims = list(claims)
        names = {c.name for c in claims}
        kept = [c for c in self.metrics.get("claims", []) if c.get("name") not in names]
        self.record("claims", [*kept, *(c.as_record() for c in claims)])
        return claims

    def conclude(
        self, answer: str, *, rests_on: dict[str, str], unmet: Sequence[str] = (), short: str = ""
    ) -> dict[str, Any]:
        """Record the notebook's answer to its RFD question, in one sentence, for the run's answer table.

        `short` is that answer as a reader takes it in at a glance, at most `MAX_ANSWER_WORDS` words, built
        from the same values (the table shows it; `answer` stays as the notebook's sentence in full, in
        `metrics.json` and `summary.json`); a longer one is a ValueError, so the notebook fails.

        `rests_on` says what the answer stands on (keys such as `sources`: the checkouts with their commits
        or "stand-in ..." for each stand-in, `provenance.sources`,
        `natten`, `dfc`, `geometry`), so a reader sees at once whether it was the full-size appendix, the real
        code and the real compiler. `unmet` names each precondition that was not met (e.g. "DFC not run:
        needs the DFC image"): a silent skip would read like a pass, so any entry there
        makes the row "unanswered" (see `answer_status`).
        """
        if not answer.strip():
            raise ValueError("conclude: the answer is empty")
        if word_count(short) > MAX_ANSWER_WORDS:
            raise ValueError(
                f"conclude: the short answer has {word_count(short)} words, more than {MAX_ANSWER_WORDS}: {short!r}"
            )
        conclusion = {"answer": answer.strip(), "rests_on": dict(rests_on), "unmet": list(unmet)}
        if short.strip():
            conclusion["short"] = " ".join(short.split())
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
        return save_figure(fig, self.path(filename), self.name)

    def savefigs(self, figures: dict[str, Any], folder: str) -> list[Path]:
        """Save many figures (file name -> figure) into a subfolder, each with its SVG twin, and close them:
        artefacts to open, not figures the published page inlines (it inlines the top-level ones only).
        Rendering is single-threaded, so they are saved one per CPU (`workers.map_forked`): notebook 06
        saves a picture of each of its 40-odd graphs."""
        import matplotlib.pyplot as plt

        (self.dir / folder).mkdir(parents=True, exist_ok=True)
        saved = map_forked(lambda name: self.savefig(figures[name], f"{folder}/{name}"), list(figures))
        for fig in figures.values():
            plt.close(fig)
        return saved

    def sibling(self, name: str) -> Path:
        """The artefact folder of another notebook in the same run (notebook 05 reads 02's and 03's)."""
        return self.run_dir / name

    @property
    def model_text(self) -> str:
        """Where the notebook's model is declared, for errors."""
        return f"its model: {self.model.where}" if self.model else "no model"

    def _declared(self, key: str) -> Metric[Any] | None:
        """The model's field for `key` (None when the notebook has no model); an undeclared key is refused."""
        if self.model is None:
            return None
        metric = self.model.record.metrics().get(key)
        if metric is None:
            raise RecordError(
                f"{self.name} records {key!r}, which its model does not declare: add `{key} = Metric(<kind>)` to "
                f"{self.model.record.__name__} in {self.model.where} (docs/notebooks.md)"
            )
        return metric

    def _check_unit(self, metric: Metric[Any], unit: str | None) -> None:
        if unit is not None and unit != metric.unit:
            declared = f"declares {metric.unit!r}" if metric.unit else "declares none"
            raise RecordError(f"{self.name}: {metric.key!r} given the unit {unit!r}, but {self.model_text} {declared}")

    def _write(self) -> None:
        text = metrics_file.dumps(self.name, self.headline, self.metrics, self.display)
        write_atomic(metrics_file.path(self.dir), text)


def save_figure(fig: Any, target: Path, salt: str) -> Path:
    """`fig` as `target` (PNG at 110 dpi) plus its SVG twin: text kept as text, no date, ids salted with `salt`
    (the notebook's name), so the same figure gives the same bytes (`Recorder.savefig`, the run index)."""
    import matplotlib

    fig.savefig(target, dpi=110, bbox_inches="tight")
    if target.suffix.lower() != ".svg":
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
            fig.savefig(target.with_suffix(".svg"), bbox_inches="tight", metadata={"Date": None})
    return target


def _full_width_tables() -> None:
    """Published tables show whole cells: pandas' default cuts text at 50 characters with '...', which made
    call chains and docker commands unreadable and uncopyable. A notebook may still narrow it afterwards."""
    try:
        import pandas as pd
    except ImportError:
        return
    pd.set_option("display.max_colwidth", None)


def answer_status(conclusion: dict[str, Any]) -> str:
    """ "answered", "answered on a stand-in", or "unanswered: <each unmet precondition>"."""
    if conclusion.get("unmet"):
        return "unanswered: " + "; ".join(conclusion["unmet"])
    sources = str(conclusion.get("rests_on", {}).get("sources", ""))
    if any(part.strip().startswith("stand-in") for part in sources.split(";")):
        return "answered on a stand-in"
    return "answered"


def load_metrics(run_dir: str | os.PathLike, name: str) -> dict[str, Any]:
    """Read back what a notebook recorded; an empty record when it wrote nothing (`metrics_file.read`)."""
    return dict(metrics_file.read(Path(run_dir) / name, name))


# ---- headline figures for people -------------------------------------------------------------------------


def timing_quality(recorded: dict[str, Any]) -> dict[str, Any]:
    """Whether a notebook's timings were taken on a quiet machine: every recorded row (a mapping at any depth)
    holding a boolean `contended` (`measure.Bracket`) is a timed row; counted per record key, so a reader sees
    which tables rest on contended rows, and the range of the machine's rates those rows were bracketed by
    (`rates`): an uncontended row can still come from a slow hour, when co-tenants share the memory bus and the copy
    rate halves (docs/timings.md). `text` says it in words for the index."""
    by_key: dict[str, dict[str, int]] = {}
    rows: list[dict[str, Any]] = []
    stack = [(key, value) for key, value in recorded.get("metrics", {}).items()]
    while stack:
        key, value = stack.pop()
        if isinstance(value, dict):
            if isinstance(value.get("contended"), bool):
                seen = by_key.setdefault(key, {"timed": 0, "contended": 0})
                seen["timed"] += 1
                seen["contended"] += value["contended"]
                rows.append(value)
            stack.extend((key, v) for v in value.values() if isinstance(v, (dict, list)))
        elif isinstance(value, list):
            stack.extend((key, v) for v in value if isinstance(v, (dict, list)))
    timed = sum(c["timed"] for c in by_key.values())
    contended = sum(c["contended"] for c in by_key.values())
    if not timed:
        text = "no timed rows"
    elif contended:
        where = ", ".join(f"{k} {c['contended']} of {c['timed']}" for k, c in sorted(by_key.items()) if c["contended"])
        text = f"CONTENDED: {contended} of {timed} timed rows ({where})"
    else:
        text = f"quiet: {timed} timed rows"
    rates = machine_rates(rows)
    if rates:
        text += "; " + ", ".join(
            f"{RATE_NAMES[k][0]} {lo:.0f} to {hi:.0f} {RATE_NAMES[k][1]}" for k, (lo, hi) in rates.items()
        )
    claims = claim_counts(recorded)
    if claims["text"]:
        text = f"{text}; {claims['text']}"
    return {
        "timed_rows": timed,
        "contended_rows": contended,
        "contended": contended > 0,
        "by_record": by_key,
        "rates": rates,
        "claims": claims,
        "text": text,
    }


# `measure.Rates`, as the index names them: (word, unit)
RATE_NAMES = {"copy_gbps": ("copy", "GB/s"), "sgemm_gflops": ("sgemm", "GFLOP/s")}


def machine_rates(rows: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """The lowest and highest of each rate (`RATE_NAMES`) the timed `rows` carry as a finite number; a rate no row
    carries is left out."""
    out = {}
    for key in RATE_NAMES:
        values = [float(r[key]) for r in rows if isinstance(r.get(key), (int, float)) and math.isfinite(r[key])]
        if values:
            out[key] = (min(values), max(values))
    return out


def claim_counts(recorded: dict[str, Any]) -> dict[str, Any]:
    """How a notebook's claims about time and memory were judged (`Recorder.claim`): the names of those judged
    and of those not judged with the reason, and `text` in words for the index ("" when it made none)."""
    claims = [c for c in recorded.get("metrics", {}).get("claims", []) if isinstance(c, dict)]
    judged = sorted(c["name"] for c in claims if c.get("judged"))
    unjudged = {c["name"]: c.get("status", "") for c in claims if not c.get("judged")}
    text = f"claims judged {len(judged)} of {len(claims)}" if claims else ""
    if unjudged:
        text += " (" + ", ".join(f"{name} {why}" for name, why in sorted(unjudged.items())) + ")"
    return {"judged": judged, "not_judged": unjudged, "text": text}


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
        rows.append(
            {
                "key": key,
                "label": how.get("label") or label_of(key),
                "text": format_value(value, how.get("unit"), how.get("digits", 3)),
            }
        )
    return rows
