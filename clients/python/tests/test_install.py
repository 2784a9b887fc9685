"""`pip install ./clients/python` works offline (the in-tree build backend) and
the installed package is importable away from the source tree."""

import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1]


def test_pip_install_without_network(tmp_path):
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target),
                        str(SRC)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-c", "import warden, warden.bench; print(warden.__file__)"],
                       cwd=tmp_path, env={"PYTHONPATH": str(target)}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()).is_relative_to(target)
    dist = next(target.glob("warden_client-*.dist-info"))
    record = (dist / "RECORD").read_text()
    assert "warden/wire.py,sha256=" in record and "Requires-Dist: msgpack" in (dist / "METADATA").read_text()
