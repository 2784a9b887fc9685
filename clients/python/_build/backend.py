"""A PEP 517 build backend for the pure-Python package warden, standard library only.

It writes the wheel (warden/ and its dist-info) and the sdist from
pyproject.toml's [project] table, so installing needs neither the network
nor setuptools. PEP 660 editable installs get a .pth file naming this folder.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "warden"
TAG = "py3-none-any"


def _project() -> dict:
    p = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    init = (ROOT / PACKAGE / "__init__.py").read_text()
    p["version"] = re.search(r'^__version__ = "([^"]+)"', init, re.M).group(1)
    return p


def _dist_name(p: dict) -> str:
    return re.sub(r"[-_.]+", "_", p["name"]).lower()


def _metadata(p: dict) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p['description']}", f"Requires-Python: {p['requires-python']}"]
    lines += [f"License: {p['license']['text']}"] if "license" in p else []
    lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    readme = ROOT / p.get("readme", "README.md")
    if readme.exists():
        lines.append("Description-Content-Type: text/markdown")
        return "\n".join(lines) + "\n\n" + readme.read_text()
    return "\n".join(lines) + "\n"


def _entry_points(p: dict) -> str:
    scripts = p.get("scripts", {})
    if not scripts:
        return ""
    return "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in scripts.items())


def _sources() -> list[Path]:
    return sorted(f for f in (ROOT / PACKAGE).rglob("*.py") if "__pycache__" not in f.parts)


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory: str, files: dict[str, bytes], p: dict) -> str:
    dist = f"{_dist_name(p)}-{p['version']}"
    info = f"{dist}.dist-info"
    files = dict(files)
    files[f"{info}/METADATA"] = _metadata(p).encode()
    files[f"{info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: warden-backend\nRoot-Is-Purelib: true\n"
                              f"Tag: {TAG}\n").encode()
    files[f"{info}/top_level.txt"] = f"{PACKAGE}\n".encode()
    if _entry_points(p):
        files[f"{info}/entry_points.txt"] = _entry_points(p).encode()
    record = [_record_line(n, d) for n, d in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    name = f"{dist}-{TAG}.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files.items():
            z.writestr(zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0)), d)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


get_requires_for_build_sdist = get_requires_for_build_editable = get_requires_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p = _project()
    return _write_wheel(wheel_directory, {f.relative_to(ROOT).as_posix(): f.read_bytes() for f in _sources()}, p)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    p = _project()
    return _write_wheel(wheel_directory, {f"__editable__.{_dist_name(p)}.pth": f"{ROOT}\n".encode()}, p)


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = f"{_dist_name(p)}-{p['version']}"
    paths = [ROOT / "pyproject.toml", ROOT / "README.md", ROOT / "_build" / "backend.py", *_sources()]
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        for f in paths:
            tar.add(f, arcname=f"{base}/{f.relative_to(ROOT).as_posix()}")
        pkg_info = _metadata(p).encode()
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(pkg_info)
        tar.addfile(ti, io.BytesIO(pkg_info))
    return name
