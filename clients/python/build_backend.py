"""A PEP 517 build backend with the standard library only: it packs
src/zklock into a pure-Python wheel (and an sdist), so that
`pip install ./clients/python` works with no package index at hand."""

import base64
import hashlib
import io
import os
import tarfile
import zipfile

NAME, VERSION = "zklock", "0.1.0"
HERE = os.path.dirname(os.path.abspath(__file__))
SUMMARY = "A client of zklock serve: fair ZooKeeper locks, semaphores and elections from Python, standard library only"


def _metadata():
    readme = ""
    path = os.path.join(HERE, "README.md")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            readme = f.read()
    return (
        "Metadata-Version: 2.1\n"
        "Name: %s\nVersion: %s\nSummary: %s\nLicense: Apache-2.0\nRequires-Python: >=3.8\n"
        "Description-Content-Type: text/markdown\n\n%s" % (NAME, VERSION, SUMMARY, readme)
    )


def _package_files():
    src = os.path.join(HERE, "src", NAME)
    for name in sorted(os.listdir(src)):
        if name.endswith(".py") or name == "py.typed":
            yield "%s/%s" % (NAME, name), os.path.join(src, name)


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    wheel_name = "%s-%s-py3-none-any.whl" % (NAME, VERSION)
    info = "%s-%s.dist-info" % (NAME, VERSION)
    files = [(arc, open(path, "rb").read()) for arc, path in _package_files()]
    files.append((info + "/METADATA", _metadata().encode()))
    files.append((info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: zklock build_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"))
    record = [_record_line(arc, data) for arc, data in files] + [info + "/RECORD,,"]
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files:
            z.writestr(arc, data)
        z.writestr(info + "/RECORD", "\n".join(record) + "\n")
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, VERSION)
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ("pyproject.toml", "build_backend.py", "README.md"):
            path = os.path.join(HERE, rel)
            if os.path.exists(path):
                t.add(path, arcname=base + "/" + rel)
        for arc, path in _package_files():
            t.add(path, arcname=base + "/src/" + arc)
        pkg = _metadata().encode()
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(pkg)
        t.addfile(ti, io.BytesIO(pkg))
    return name
