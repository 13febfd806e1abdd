"""README's module map names every package and module of weftlib, and nothing that is not there."""

from __future__ import annotations

import re

from tests.conftest import REPO

PACKAGE = REPO / "weftlib"


def module_map() -> str:
    text = (REPO / "README.md").read_text()
    block = re.search(r"## Module map\n\n```\n(.*?)```", text, re.S)
    assert block, "README.md has no module map block"
    return block.group(1)


def test_every_module_is_on_the_map():
    shown = module_map()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "standins" or path.name == "__init__.py":
            continue
        if not re.search(rf"\b{re.escape(path.stem)}\b", shown):
            missing.append(str(rel))
    assert not missing, f"modules missing from README's module map: {missing}"


def test_every_package_on_the_map_exists():
    shown = module_map()
    named = re.findall(r"^  (\w+)/", shown, re.M)
    assert named, "the map names no package"
    assert [n for n in named if not (PACKAGE / n).is_dir()] == []
    packages = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    assert sorted(set(named) & set(packages)) == packages
