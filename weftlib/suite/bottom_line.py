"""The run's bottom line: one sentence, built from the verdict table's rows (or, without them, the answer table),
that the index, `summary.json` and the RFD page open with: how many RFD graphs are predicted refused as written,
for how many a proven exact variant or `gate fix` passes, how many wait on a DFC run, and the next step with its
command. Nothing in it is typed by hand: every count is read from the rows the pages show beneath it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

RERUN = ".venv/bin/python -m weftlib run --params {params} {sets}"
GATE, CUT = "05_gate_pairing", "06_device_cut"  # the notebooks whose DFC packs a DFC run parses
DEFAULT_SCRIPTS = {GATE: f"{GATE}/dfc_pack/run_dfc.sh", CUT: f"{CUT}/cut_pack/run_dfc.sh"}


@dataclass(frozen=True)
class Where:
    """Where the next step's commands point: the run folder as a reader names it, the DFC packs' scripts
    inside it by notebook (`verdicts.pack_scripts`), and the plan file to rerun."""

    run_dir: str
    scripts: dict[str, str]
    params_file: str


def _passes_after(row: dict[str, Any]) -> bool:
    """Whether the row's best exact variant or its `gate fix` output is predicted to parse (or parsed)."""
    variant, fixed = row.get("variant") or {}, row.get("fixed") or {}
    return variant.get("verdict") == "pass" or fixed.get("verdict") == "pass"


def _waits_on_dfc(row: dict[str, Any]) -> bool:
    """Whether the row's verdicts rest on the prediction only: no DFC run has judged its faithful graph or its
    best variant."""
    sides = [row["faithful"], *([row["variant"]] if row.get("variant") else [])]
    return any(side.get("basis") != "DFC" for side in sides)


def next_step(rows: list[dict[str, Any]], where: Where, image: str) -> str:
    """The one step that settles most: the DFC pack (then the rerun that reads its results) while any row
    waits on a DFC run; else the rewrite a refused row still needs; else nothing."""
    if any(_waits_on_dfc(r) for r in rows):
        scripts = {
            name: (Path(where.run_dir) / path).as_posix() for name, path in {**DEFAULT_SCRIPTS, **where.scripts}.items()
        }
        runs = " and ".join(f"`bash {script}`" for script in scripts.values())
        sets = " ".join(
            f"--set {name}.dfc_results_dir={Path(script).parent.as_posix()}" for name, script in scripts.items()
        )
        return (
            f"run {runs} where Docker has the {image} image "
            f'(README, "On real checkouts, and with the DFC"), then `{RERUN.format(params=where.params_file, sets=sets)}`'
        )
    stuck = [r["graph"] for r in rows if r["faithful"]["verdict"] == "refused" and not _passes_after(r)]
    if stuck:
        return f"an exact rewrite for {', '.join(stuck)} (its row says which refusals remain)"
    return "none: every RFD graph parses in the DFC as written or through a proven exact variant"


def verdict_sentence(rows: list[dict[str, Any]], where: Where, image: str) -> str:
    """The bottom line from the verdict table's rows."""
    total = len(rows)
    refused = sum(r["faithful"]["verdict"] == "refused" for r in rows)
    passing = sum(_passes_after(r) for r in rows)
    waiting = sum(_waits_on_dfc(r) for r in rows)
    return (
        f"Of the {total} RFD graphs, {refused} are predicted refused as written; for {passing} a proven exact "
        f"variant or `gate fix` passes; {waiting} wait on a DFC run. "
        f"Next: {next_step(rows, where, image)}."
    )


def answers_sentence(answers: list[dict[str, Any]]) -> str:
    """The bottom line of a run without a verdict table (a plan without 05 and 06, or one that failed there):
    how many questions are answered, and the first unmet precondition as the next step."""
    answered = sum(a["kind"] != "unanswered" for a in answers)
    stand_in = sum(a["kind"] == "stand-in" for a in answers)
    unmet = next((u for a in answers for u in a.get("unmet") or []), "")
    failed = next((a["notebook"] for a in answers if "failed" in a.get("status", "")), "")
    silent = next((f"{a['notebook']} {a['status']}" for a in answers if a["kind"] == "unanswered"), "")
    if failed:
        step = f"fix {failed}, whose failure the notebooks table names"
    else:
        step = unmet or silent or "none: every question of this plan is answered"
    return (
        f"No verdict table in this run; {answered} of {len(answers)} questions answered"
        + (f" ({stand_in} on a stand-in)" if stand_in else "")
        + f". Next: {step}."
    )


def bottom_line(rows: list[dict[str, Any]], answers: list[dict[str, Any]], where: Where) -> str:
    """The sentence the run's pages open with (`verdict_sentence`, or `answers_sentence` without rows)."""
    if not rows:
        return answers_sentence(answers)
    from ..gate.compiler.dfc_target import image  # late: a run without graphs reads no device record

    return verdict_sentence(rows, where, image())
