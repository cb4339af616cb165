"""Registration with transformers' Auto classes as soon as they can be used, and not before.

``import hf_variants`` must register every variant before any Auto lookup a user can make, yet stay
cheap (no torch, no transformers), so that the settings and the command line can live inside the
package and ``hf-variants --help`` stays fast. An Auto lookup needs ``AutoConfig``'s module,
:data:`AUTO_MODULE`; so the variants are registered

- at once, when ``import hf_variants`` finds that module already imported;
- otherwise as soon as it has been imported and the import that brought it in is complete: an import
  hook counts the ``transformers`` and ``hf_variants`` modules being executed and registers when the
  count returns to zero, so that registration (which imports ``transformers.modeling_utils`` and the
  variants' modules) never meets one of them half-initialised.

The hook only times the registration: it changes no module and removes itself once it has run.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from types import ModuleType

#: The module that defines ``AutoConfig`` (every ``AutoModel*`` class imports it): once it is
#: imported, a lookup can be made.
AUTO_MODULE = "transformers.models.auto.configuration_auto"
#: Packages whose modules, while one is being executed, postpone the registration.
WATCHED_PACKAGES = ("transformers", "hf_variants")
#: Loaders created for one module each (``FileFinder``'s), which can be given a counting ``exec_module``.
PER_MODULE_LOADERS = (importlib.machinery.SourceFileLoader, importlib.machinery.SourcelessFileLoader,
                      importlib.machinery.ExtensionFileLoader)  # fmt: skip


def _watched(name: str) -> bool:
    return any(name == package or name.startswith(package + ".") for package in WATCHED_PACKAGES)


class RegisterAfterImports(importlib.abc.MetaPathFinder):
    """A meta-path finder that finds nothing itself: it counts the watched modules being executed (by
    giving each one's own loader a counting ``exec_module``) and calls ``register`` once
    :data:`AUTO_MODULE` is imported and no watched module is still executing."""

    def __init__(self, register: Callable[[], None]) -> None:
        self.register = register
        self.executing = 0
        self.lock = threading.RLock()
        self.done = False

    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None):
        if self.done or not _watched(name):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if isinstance(spec.loader, PER_MODULE_LOADERS):
            spec.loader.exec_module = self._counting(spec.loader.exec_module)  # type: ignore[method-assign]
        return spec

    def _counting(self, exec_module: Callable[[ModuleType], None]) -> Callable[[ModuleType], None]:
        def counted(module: ModuleType) -> None:
            with self.lock:
                self.executing += 1
            try:
                exec_module(module)
            finally:
                with self.lock:
                    self.executing -= 1
                    ready = self.executing == 0 and not self.done and AUTO_MODULE in sys.modules
                    if ready:
                        self.done = True
                if ready:
                    self.run()

        return counted

    def run(self) -> None:
        """Remove the hook, then register (a failure is a warning here: the import that triggered it is the
        user's, and the failure repeats, with its traceback, when a model is first used)."""
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        try:
            self.register()
        except Exception as error:
            warnings.warn(f"hf_variants could not register its models with the Auto classes: {error!r}",
                          stacklevel=2)  # fmt: skip


def register_when_ready(register: Callable[[], None]) -> None:
    """Call ``register`` now if the Auto classes exist, else right after the import that brings them in."""
    if AUTO_MODULE in sys.modules:
        register()
        return
    if not any(isinstance(finder, RegisterAfterImports) for finder in sys.meta_path):
        sys.meta_path.insert(0, RegisterAfterImports(register))
