"""Type-check the environment once, when the venv is built: every outside package that weftlib imports, analysed
by mypy into the venv's own cache (pyproject's `cache_dir`), so that `make check` on a fresh clone analyses
weftlib itself and reads the packages' results, which depend on the venv alone. Cold, the packages (transformers
above all) are most of mypy's time; weftlib's own modules are never cached here, so none is skipped.

Run by the Makefile's venv target: `python scripts/mypy_environment.py` (its exit status is mypy's).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def outside_imports(package: Path) -> list[str]:
    """The top-level names of every module `package` imports that is neither the standard library nor itself."""
    names: set[str] = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.partition(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.partition(".")[0])
    return sorted(names - set(sys.stdlib_module_names) - {package.name, "__future__"})


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:  # a file, not `-c`: mypy refuses a command beside pyproject's `files`
        program = Path(tmp) / "outside_packages.py"
        program.write_text("".join(f"import {name}\n" for name in outside_imports(REPO / "weftlib")))
        done = subprocess.run([sys.executable, "-m", "mypy", str(program)], check=False, cwd=REPO, capture_output=True)
    if done.returncode:
        sys.stderr.write(done.stdout.decode() + done.stderr.decode())
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
