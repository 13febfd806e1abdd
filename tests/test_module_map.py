"""The module map (docs/modules.md) names every module of weftlib and nothing that is not there; README's short
map names every top-level package and every sub-package of the gate."""

from __future__ import annotations

import re

from tests.conftest import REPO

PACKAGE = REPO / "weftlib"


def _modules() -> set[str]:
    """Every module and package of weftlib (the stand-ins' copies of outside code excluded), dotted from weftlib."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "standins" and len(rel.parts) > 2:
            continue
        parts = rel.with_suffix("").parts
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return {n for n in names if n}


def _mapped() -> set[str]:
    """The names docs/modules.md lists: a `### pkg.sub` heading per package (`weftlib` for the top level), then
    one `- \\`module\\`: ...` row per module."""
    text = (REPO / "docs" / "modules.md").read_text()
    names, package = set(), None
    for line in text.splitlines():
        if heading := re.match(r"^### `([\w.]+)`", line):
            package = heading.group(1)
            if package != "weftlib":  # the top-level modules' heading
                names.add(package)
        elif (row := re.match(r"^- `(\w+)`", line)) and package:
            names.add(row.group(1) if package == "weftlib" else f"{package}.{row.group(1)}")
    return names


def test_every_module_is_on_the_map_and_nothing_else():
    modules, mapped = _modules(), _mapped()
    assert sorted(modules - mapped) == [], "modules missing from docs/modules.md"
    assert sorted(mapped - modules) == [], "docs/modules.md names modules that do not exist"


def test_readme_names_every_package():
    readme = (REPO / "README.md").read_text()
    block = re.search(r"## Where things live\n\n```\n(.*?)```", readme, re.S)
    assert block, "README.md has no 'Where things live' block"
    top = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    assert [n for n in top if not re.search(rf"^  {n}/", block.group(1), re.M)] == []
    gate = sorted(p.parent.name for p in (PACKAGE / "gate").glob("*/__init__.py"))
    assert [n for n in gate if f"{n}/" not in block.group(1)] == []
