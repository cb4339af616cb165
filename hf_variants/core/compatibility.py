"""The versions of transformers and torch this code is tested at (the package's own ranges, ``pyproject.toml``;
CI tests both ends). An export's remote code is this package's code, run by whatever versions the loading machine
has, where no installer checked them: it checks them itself when it is imported, and refuses an unsupported one in
one line naming the installed and the supported versions, rather than loading wrongly (remote-code repositories
broke at transformers 5.0, some silently with random weights)."""

from __future__ import annotations

from importlib.metadata import version as installed_version

from packaging.version import Version

#: ``{distribution: (lowest supported, first unsupported)}``, as ``pyproject.toml`` declares them (a test keeps them
#: equal).
SUPPORTED_VERSIONS = {"transformers": ("5.17.0", "6"), "torch": ("2.13.0", "3")}


def supported_range(name: str) -> str:
    low, high = SUPPORTED_VERSIONS[name]
    return f"{name}>={low},<{high}"


def check_supported_versions(installed: dict[str, str] | None = None) -> None:
    """Refuse, with an ``ImportError`` of one line, a transformers or torch outside :data:`SUPPORTED_VERSIONS`
    (``installed``: the versions to check; default: the installed distributions', read without importing torch)."""
    installed = installed or {name: installed_version(name) for name in SUPPORTED_VERSIONS}
    for name, (low, high) in SUPPORTED_VERSIONS.items():
        version = Version(installed[name]).release  # 2.13.0+cpu → (2, 13, 0): a local build is its release
        if not Version(low).release <= version < Version(high).release:
            raise ImportError(f"This hf-variants model's code supports {supported_range(name)}, but {name} "
                              f"{installed[name]} is installed: pip install '{supported_range(name)}'.")


check_supported_versions()
