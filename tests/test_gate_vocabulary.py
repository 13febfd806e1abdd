"""The gate's words live once, in `weftlib.gate.vocabulary`: no other module of the gate spells one as a constant
of its own or compares against it as a bare string, and the vocabulary imports nothing (the DFC image carries it)."""

from __future__ import annotations

import ast
import inspect
from enum import StrEnum
from pathlib import Path

from weftlib.gate import vocabulary

GATE = Path(vocabulary.__file__).parent
# pages/ is converted by its own change (issue 34): drop it here then; the vocabulary is the words' home
NOT_SCANNED = ("vocabulary.py",)
WORDS = {
    member.value
    for _, kind in inspect.getmembers(vocabulary, inspect.isclass)
    if issubclass(kind, StrEnum) and kind is not StrEnum
    for member in kind
}


def _scanned() -> list[Path]:
    files = sorted(GATE.rglob("*.py"))
    return [f for f in files if not any(f.relative_to(GATE).as_posix().startswith(skip) for skip in NOT_SCANNED)]


def _words_in(node: ast.AST | None) -> list[str]:
    """The vocabulary words a literal spells: a string, or the strings of a tuple, list or set display."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if node.value in WORDS else []
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [w for element in node.elts for w in _words_in(element)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set", "tuple"):
        return [w for arg in node.args for w in _words_in(arg)]
    return []


def _bare_words(tree: ast.Module) -> list[tuple[int, str, str]]:
    """(line, what, word) for each module-level constant and each comparison that spells a word."""
    found = []
    for statement in tree.body:
        names = statement.targets if isinstance(statement, ast.Assign) else [getattr(statement, "target", None)]
        if isinstance(statement, ast.Assign | ast.AnnAssign) and not any(
            isinstance(n, ast.Name) and n.id == "__all__" for n in names
        ):  # `__all__` names functions (`evidence.unjudged`), not words
            found += [(statement.lineno, "constant", w) for w in _words_in(statement.value)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                found += [(node.lineno, "comparison", w) for w in _words_in(side)]
    return found


def test_words_are_distinct_within_each_vocabulary_and_known() -> None:
    assert {"parse", "refused", "unjudged", "pass", "fail", "allowlist held", "device", "probe pack"} <= WORDS
    assert vocabulary.PairVerdict.FOREIGN_RESULT == "DFC result refused: about another model"
    assert set(vocabulary.PairVerdict) > vocabulary.UNJUDGED_PAIR_VERDICTS
    assert set(vocabulary.Seen) > vocabulary.OBSERVED and vocabulary.Seen.DOCUMENTED not in vocabulary.OBSERVED


def test_no_module_of_the_gate_spells_a_word_of_its_own() -> None:
    scanned = _scanned()
    assert len(scanned) > 40 and GATE / "compiler" / "pairing.py" in scanned  # the scan sees the gate
    bare = {
        f"{path.relative_to(GATE)}:{line}: {what} {word!r}"
        for path in scanned
        for line, what, word in _bare_words(ast.parse(path.read_text()))
    }
    assert not bare, "spelled outside weftlib.gate.vocabulary:\n" + "\n".join(sorted(bare))


def test_the_scan_finds_a_bare_word() -> None:
    """The scan fails where a module keeps a word of its own, as `standing` and `pairing` once did."""
    source = 'PARSE, REFUSED = "parse", "refused"\nHELD = "allowlist held"\ndef f(v):\n    return v == "fail"\n'
    assert [(what, w) for _, what, w in _bare_words(ast.parse(source))] == [
        ("constant", "parse"),
        ("constant", "refused"),
        ("constant", "allowlist held"),
        ("comparison", "fail"),
    ]


def test_the_vocabulary_imports_nothing() -> None:
    """The DFC image carries it with `dfc_runner` and `dfc_log`, and nothing else of the suite."""
    tree = ast.parse(Path(vocabulary.__file__).read_text())
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported == {"__future__", "enum"}
