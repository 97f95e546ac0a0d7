"""Ray is an optional extra (`servetune[ray]`): importing servetune, its CLI and every module that does not run on
Ray leaves it unimported — only `tune.ray_executor` and `load.ray_transport` import it, when they are used."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import importlib, pkgutil, sys
import servetune
import servetune.cli
ON_RAY = {"servetune.tune.execution.ray_executor", "servetune.load.ray_transport", "servetune.__main__"}
names = sorted(m.name for m in pkgutil.walk_packages(servetune.__path__, "servetune."))
for name in names:
    if name not in ON_RAY:
        importlib.import_module(name)
assert any(n.startswith("servetune.cli.") for n in names)
bad = sorted(m for m in sys.modules if m == "ray" or m.startswith("ray."))
print(len(names), bad)
sys.exit(1 if bad else 0)
"""


def test_no_module_off_ray_imports_ray() -> None:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]


def test_the_cli_runs_without_importing_ray() -> None:
    code = "import sys; from servetune.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
    code += "sys.exit(1 if 'ray' in sys.modules else 0)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
