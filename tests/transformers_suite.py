"""transformers' own model test suite, fetched from the source distribution of the installed version.

The suite (``ModelTesterMixin`` in ``tests/test_modeling_common.py``) is what every in-tree model
passes. It ships in transformers' sdist on the package index, not in the wheel,
so :func:`load_model_tester_mixin` downloads the sdist of the *installed* transformers version once
(``pip download --no-binary``), extracts that file into a cache folder and imports it as the package
``transformers_tests``. Nothing is copied into this repository. (``test_configuration_common.py``
needs ``tests/utils/``, which the sdist lacks; our configs are tested by our own suite.)

Two helper modules the suite imports are not in the sdist (``tests/exporters/test_export.py`` and
``tests/generation/test_utils.py``); they are replaced by empty mixins: our encoders do not generate,
and ``torch.export`` is tested by ``tests/test_serving.py``.

Set ``HF_VARIANTS_TRANSFORMERS_TESTS`` to a folder that holds an extracted sdist's ``tests/`` to
use it instead of downloading (for a machine without the package index).
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from types import ModuleType

import transformers

SUITE_FILES = ("test_modeling_common.py",)
#: Modules the suite imports that the sdist lacks → the empty mixin each must define.
MISSING_HELPERS = {
    "exporters/test_export.py": "ExportTesterMixin",
    "generation/test_utils.py": "GenerationTesterMixin",
}
PACKAGE = "transformers_tests"


def cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return root / "hf-variants" / f"transformers-{transformers.__version__}-tests"


def _download_suite(target: Path) -> None:
    """Fetches the sdist of the installed transformers and extracts the suite's files into target."""
    version = transformers.__version__
    with tempfile.TemporaryDirectory() as download:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--no-build-isolation",
            f"transformers=={version}",
            "-d",
            download,
        ]
        result = subprocess.run(command, capture_output=True, text=True)
        archives = list(Path(download).glob("transformers-*.tar.gz"))
        if result.returncode != 0 and not archives:
            raise RuntimeError(
                f"could not download the transformers {version} source distribution for its model test suite "
                f"({' '.join(command)}):\n{result.stderr[-2000:]}\nSet HF_VARIANTS_TRANSFORMERS_TESTS to the "
                "tests/ folder of an extracted sdist, or deselect with -m 'not conformance'."
            )
        staging = Path(tempfile.mkdtemp(dir=target.parent))
        with tarfile.open(archives[0]) as archive:
            for name in SUITE_FILES:
                member = archive.getmember(f"transformers-{version}/tests/{name}")
                (staging / name).write_bytes(archive.extractfile(member).read())
        try:
            staging.rename(target)  # atomic: a half-extracted suite is never used
        except OSError:  # another test process (pytest -n) extracted it first
            if not target.is_dir():
                raise
            shutil.rmtree(staging)


def suite_folder() -> Path:
    """The folder holding the suite's files, downloading them on first use."""
    if configured := os.environ.get("HF_VARIANTS_TRANSFORMERS_TESTS"):
        return Path(configured)
    target = cache_dir()
    if not target.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        _download_suite(target)
    return target


def load_model_tester_mixin() -> type:
    """``ModelTesterMixin`` of the installed transformers' own test suite."""
    source = suite_folder()
    package_root = Path(tempfile.mkdtemp(prefix="transformers-suite-"))
    package = package_root / PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name in SUITE_FILES:
        (package / name).write_text((source / name).read_text())
    for relative, mixin in MISSING_HELPERS.items():
        path = package / relative
        path.parent.mkdir(exist_ok=True)
        (path.parent / "__init__.py").write_text("")
        path.write_text(f'class {mixin}:\n    """Not in the sdist; see tests/transformers_suite.py."""\n')
    sys.path.insert(0, str(package_root))
    try:
        modeling: ModuleType = importlib.import_module(f"{PACKAGE}.test_modeling_common")
    finally:
        sys.path.remove(str(package_root))
    return modeling.ModelTesterMixin
