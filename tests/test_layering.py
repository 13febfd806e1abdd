"""The import contracts in pyproject.toml hold, and the checker that enforces them can see a broken one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

LINT_IMPORTS = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"


def lint(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache", *args], check=False, cwd=REPO, capture_output=True, text=True, timeout=300
    )


def test_the_project_keeps_its_contracts():
    result = lint()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_broken_contract_is_reported(tmp_path):
    """Negative control: gate reads graphs through onnx_core, so forbidding that import must fail."""
    config = tmp_path / "broken.toml"
    config.write_text(
        '[tool.importlinter]\nroot_package = "weftlib"\n\n'
        '[[tool.importlinter.contracts]]\nname = "control"\ntype = "forbidden"\n'
        'source_modules = ["weftlib.gate"]\nforbidden_modules = ["weftlib.onnx_core"]\n'
    )
    result = lint("--config", str(config))
    assert result.returncode == 1 and "control BROKEN" in result.stdout, result.stdout + result.stderr
