"""The package's layout, read statically: on the import graph (every import, functions' included, but
type-checking ones) no module imports itself back through others, the library never imports the lab and
a config reaches no modeling code; in the source, no module but the engines runs a training step."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from .helpers import REPO_ROOT

PACKAGES = ("hf_variants",)


def module_files() -> dict[str, Path]:
    files = {}
    for package in PACKAGES:
        for path in (REPO_ROOT / package).rglob("*.py"):
            if "evaluate_glue" in path.parts:  # transformers' evaluate module, run by `evaluate`, not imported
                continue
            parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def imported_names(module: str, path: Path) -> set[str]:
    """Absolute names of everything ``module`` imports (relative imports resolved), except under
    ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only = {id(node) for branch in ast.walk(tree) if isinstance(branch, ast.If)
                 and "TYPE_CHECKING" in ast.dump(branch.test) for statement in branch.body
                 for node in ast.walk(statement)}  # fmt: skip
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            names |= {f"{base}.{alias.name}" for alias in node.names} | {base}
    return names


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    graph = {}
    for module, path in files.items():
        targets = set()
        for name in imported_names(module, path):
            while name and name not in files:  # `from pkg import function` → pkg
                name = name.rpartition(".")[0]
            if name and name != module and not module.startswith(f"{name}."):  # a parent package runs first anyway
                targets.add(name)
        graph[module] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_the_graph_finds_what_it_should() -> None:
    graph = import_graph()
    assert "hf_variants.core.composition" in graph["hf_variants.core.configuration_encoder"]
    assert "hf_variants.training.nonfinite" in graph["hf_variants.training.run_mlm"]
    assert "hf_variants.lab.statistics" in graph["hf_variants.lab.measurement"]  # a function-level import
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_itself_back() -> None:
    assert cycles(import_graph()) == []


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph with every module collapsed into its top-level part of the package
    (``hf_variants.training.run_glue`` → ``hf_variants.training``)."""

    def part(module: str) -> str:
        return ".".join(module.split(".")[:2])

    packages: dict[str, set[str]] = {part(m): set() for m in graph}
    for module, targets in graph.items():
        packages[part(module)] |= {part(t) for t in targets if part(t) != part(module)}
    return packages


def test_no_part_of_the_package_imports_itself_back() -> None:
    """Modules without loops can still make parts that loop (the Hub export importing the engines' run-folder
    helpers while the engines import the export): the storage both build on lies below both."""
    packages = package_graph(import_graph())
    assert cycles(packages) == []
    assert "hf_variants.training" not in packages["hf_variants.hub"]
    assert packages["hf_variants.storage"] == set()  # below everything that writes
    assert cycles(package_graph({"p.a.x": {"p.b.y"}, "p.b.y": {"p.a.z"}, "p.a.z": set()})) == [["p.a", "p.b"]]


def library_modules(graph: dict[str, set[str]]) -> list[str]:
    """The library: every module but the lab's and the command line's (the edge, which imports both)."""
    return [m for m in graph if not m.startswith(("hf_variants.lab", "hf_variants.cli"))]


def test_the_library_never_imports_the_lab() -> None:
    graph = import_graph()
    assert not {(m, t) for m in library_modules(graph) for t in graph[m] if t.startswith("hf_variants.lab")}


def test_nothing_imports_the_command_line() -> None:
    """argv is parsed only at the edge: the command line imports the library and the lab, never the reverse."""
    graph = import_graph()
    assert "hf_variants.settings.pretraining" in graph["hf_variants.cli.commands"]  # the edge reads the settings
    assert not {(m, t) for m in graph if not m.startswith("hf_variants.cli") for t in graph[m]
                if t.startswith("hf_variants.cli")}  # fmt: skip


def test_settings_are_declared_without_torch_or_transformers() -> None:
    """The settings modules import only each other and the package root (module level and functions alike,
    but the finetuning settings' functions that build transformers' ``HfArgumentParser`` and list
    ``TrainingArguments`` for ``--help_all``)."""
    files = module_files()
    for module in (m for m in files if m.startswith("hf_variants.settings")):
        imported = imported_names(module, files[module]) - {"transformers", "transformers.HfArgumentParser",
                                                                  "transformers.TrainingArguments"}
        outside = {name for name in imported if name.split(".")[0] in ("torch", "transformers", "accelerate",
                                                                        "datasets", "numpy")}  # fmt: skip
        inside = {name for name in imported if name.startswith("hf_variants.")
                  and not name.startswith(("hf_variants.settings", "hf_variants.VARIANT_MODEL_TYPES"))}  # fmt: skip
        assert not outside and not inside, (module, outside, inside)


def test_compare_without_the_lab_extra_names_it_before_any_work(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from hf_variants.cli.commands import main

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    with pytest.raises(SystemExit, match=r"hf-variants compare: .*matplotlib.*pip install 'hf-variants\[lab\]'"):
        main(["compare", "--output_dir", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def idea_folder(module: str) -> str | None:
    """``hf_variants.core.mixers.mgk`` for any module of that idea folder, else None."""
    parts = module.split(".")
    if parts[:2] == ["hf_variants", "core"] and len(parts) >= 4 and parts[2] in ("mixers", "schemes"):
        return ".".join(parts[:4])
    return None


def test_idea_folders_import_the_core_not_each_other() -> None:
    """An idea folder builds on the core's shared blocks (attention, orthogonal weights, layers), never on
    another idea's folder: removing or changing one idea cannot break another."""
    graph = import_graph()
    assert idea_folder("hf_variants.core.mixers.mgk.modeling_mgk") == "hf_variants.core.mixers.mgk"
    assert "hf_variants.core.attention" in graph["hf_variants.core.mixers.mgk.modeling_mgk"]
    crossings = {(module, target) for module in graph if (folder := idea_folder(module))
                 for target in graph[module] if idea_folder(target) not in (None, folder)}  # fmt: skip
    assert crossings == set()


def test_a_config_reaches_no_modeling_code() -> None:
    """Every module a configuration module imports, directly or through others of this package, is free
    of torch and of modeling code: a config declares (fields, validation, controls), it builds nothing.
    (What an exported config loads at run time is checked in tests/test_hub.py.)"""
    files = module_files()
    graph = import_graph()
    configs = [m for m in graph if m.rsplit(".", 1)[-1].startswith("configuration_")]
    assert len(configs) >= 5 + 9 + 1  # the variants', every idea's spec and the encoder's
    reached, pending = set(), list(configs)
    while pending:
        module = pending.pop()
        if module not in reached:
            reached.add(module)
            pending.extend(graph[module])
    modeling = sorted(m for m in reached if m.rsplit(".", 1)[-1].startswith("modeling_"))
    with_torch = sorted(m for m in reached if any(name == "torch" or name.startswith(("torch.", "torchdiffeq"))
                                                  for name in imported_names(m, files[m])))  # fmt: skip
    assert (modeling, with_torch) == ([], [])
    assert {"hf_variants.core.composition", "hf_variants.core.ideas"} <= reached


#: A path into the repository beside the package: its scripts, benchmarks, tools, studies and committed records.
REPOSITORY_PATH = re.compile(r"\b(?:scripts|benchmarks|tools|experiments|examples)/[\w./-]*\.(?:py|sh|json|jsonl)\b"
                             r"|\bdocs/[\w./-]*\.jsonl?\b|\.\./shared\b")


def test_the_package_names_no_repository_script_and_reads_no_committed_record(tmp_path: Path) -> None:
    """The wheel is the library: none of its modules (or the studies it ships) names a script, benchmark, tool or
    study driver of the repository, or a committed record, so nothing in it depends on a checkout."""
    package = REPO_ROOT / "hf_variants"
    files = [*package.rglob("*.py"), *package.rglob("*.toml")]
    named = {f"{path.relative_to(REPO_ROOT).as_posix()}: {match.group(0)}" for path in files
             for match in REPOSITORY_PATH.finditer(path.read_text(encoding="utf-8"))}  # fmt: skip
    assert named == set()
    sample = tmp_path / "sample.py"
    sample.write_text('"""Made by ``tools/render_tables.py`` from experiments/parity/parity.json."""\n')
    assert [m.group(0) for m in REPOSITORY_PATH.finditer(sample.read_text())] == [
        "tools/render_tables.py", "experiments/parity/parity.json"]  # the scan finds both


#: The variant folders and idea folders: what one idea knows of itself.
IDEA_PACKAGES = ("hf_variants.macaron_bert", "hf_variants.mgk_bert", "hf_variants.transject",
                 "hf_variants.node_transformer")  # fmt: skip


def test_the_engines_and_the_lab_import_no_ideas_code() -> None:
    """An idea's knowledge stays with its owner: the engines and the lab reach a model through the Auto classes,
    the registries and the core's failure type, never through one idea's modules (so no idea's name needs to be
    caught or special-cased there)."""
    graph = import_graph()
    reached = {(module, target) for module in graph if module.startswith(("hf_variants.training", "hf_variants.lab"))
               for target in graph[module]
               if idea_folder(target) or target.startswith(IDEA_PACKAGES)}  # fmt: skip
    assert reached == set()
    assert idea_folder("hf_variants.core.schemes.ode.modeling_ode")  # the scan knows an idea's module


#: The longest function an engine may have, in lines: a named step of about a screen.
ENGINE_STEP_LINES = 80


def long_functions(path: Path, limit: int) -> dict[str, int]:
    """The functions and methods of ``path`` longer than ``limit`` lines (decorators and docstring included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name: node.end_lineno - node.lineno + 1 for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno - node.lineno + 1 > limit}  # fmt: skip


def test_the_engines_are_named_steps_of_a_screen(tmp_path: Path) -> None:
    """``run_mlm.train``, ``run_glue.fine_tune`` and the main job's ``compare_models`` call named steps; no function
    of the training package or of the lab (the main job, the study engine) is longer than :data:`ENGINE_STEP_LINES`."""
    engines = [path for package in ("training", "lab") for path in (REPO_ROOT / "hf_variants" / package).glob("*.py")]
    too_long = {path.name: found for path in engines if (found := long_functions(path, ENGINE_STEP_LINES))}
    assert too_long == {}
    sample = tmp_path / "sample.py"
    sample.write_text("class A:\n    def step(self):\n" + "        x = 1\n" * 80 + "def short():\n    return 1\n")
    assert long_functions(sample, ENGINE_STEP_LINES) == {"step": 81}  # the scan counts methods too


#: The one library module that runs training steps itself: the pretraining engine (accelerate's loop).
#: Fine-tuning steps run inside transformers' Trainer (``run_glue.GlueTrainer``).
PRETRAINING_ENGINE = REPO_ROOT / "hf_variants" / "training" / "run_mlm.py"
#: Scripts whose loop is what they show, not an experiment: the benchmarks time a step, the quickstart is a
#: tour of the models in a plain PyTorch loop.
STEP_SCRIPTS = {"benchmarks/benchmark.py", "benchmarks/benchmark_attention.py", "benchmarks/benchmark_sparse_mlm.py",
                "examples/quickstart.py", "benchmarks/transject_weights_benchmark.py",
                "benchmarks/benchmark_packing.py"}  # fmt: skip
#: The repository's folders of scripts beside the package (none of them in the wheel).
SCRIPT_FOLDERS = ("scripts", "benchmarks", "tools", "experiments", "examples")


def repository_scripts() -> list[Path]:
    """Every Python file of :data:`SCRIPT_FOLDERS`."""
    return [path for folder in SCRIPT_FOLDERS for path in sorted((REPO_ROOT / folder).rglob("*.py"))]


def backward_calls(path: Path) -> list[int]:
    """Lines of ``path`` that call ``<anything>.backward(...)`` — where a training step of one's own starts."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr == "backward"]  # fmt: skip


def test_no_module_outside_the_two_engines_runs_a_training_step() -> None:
    """Experiments train through the engines (and so get their non-finite check, seeds and records):
    no module of the package or of the repository's scripts calls ``backward`` but the pretraining engine and the
    scripts whose loop is the point (:data:`STEP_SCRIPTS`)."""
    candidates = [*(REPO_ROOT / "hf_variants").rglob("*.py"), *repository_scripts()]
    own_steps = {name: lines for path in candidates if path != PRETRAINING_ENGINE
                 and (name := path.relative_to(REPO_ROOT).as_posix()) not in STEP_SCRIPTS
                 and (lines := backward_calls(path))}  # fmt: skip
    assert own_steps == {}
    assert backward_calls(PRETRAINING_ENGINE)  # the scan finds the engine's own step
    assert all(backward_calls(REPO_ROOT / path) for path in STEP_SCRIPTS)  # no stale exception


def pool_constructions(path: Path) -> list[int]:
    """Lines of ``path`` that construct a process pool (``ProcessPoolExecutor(...)`` or ``Pool(...)``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {"ProcessPoolExecutor", "Pool"}
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
            and ((isinstance(node.func, ast.Name) and node.func.id in names)
                 or (isinstance(node.func, ast.Attribute) and node.func.attr in names))]  # fmt: skip


def test_the_lab_has_one_process_pool() -> None:
    """Studies run side by side through the lab's one executor (workers that die with the study and share its
    threads): no module of the package or of the repository's scripts builds a process pool of its own."""
    executor = REPO_ROOT / "hf_variants" / "lab" / "execution.py"
    candidates = [*(REPO_ROOT / "hf_variants").rglob("*.py"), *repository_scripts()]
    pools = {path.relative_to(REPO_ROOT).as_posix(): lines for path in candidates
             if path != executor and (lines := pool_constructions(path))}  # fmt: skip
    assert pools == {}
    assert pool_constructions(executor) == [pool_constructions(executor)[0]]  # the scan finds the one pool


def file_writes(path: Path) -> list[str]:
    """``name:line`` of every call in ``path`` that commits a file by hand: a rename over a target
    (``os.replace``/``os.rename``), a copy (``shutil.copy*``), or a JSON text written with ``write_text``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner = node.func.value.id if isinstance(node.func.value, ast.Name) else None
        by_hand = (owner == "os" and node.func.attr in ("replace", "rename")) or (
            owner == "shutil" and node.func.attr.startswith("copy"))
        json_text = node.func.attr == "write_text" and "json" in ast.dump(node)
        if by_hand or json_text:
            found.append(f"{node.func.attr}:{node.lineno}")
    return found


def test_the_lab_has_one_resume_record() -> None:
    """Every study keeps its finished runs through the lab's one resume record (:mod:`hf_variants.lab.records`,
    written atomically, taken only for the same settings): no lab module or study script commits a JSON file,
    renames or copies one by hand."""
    studies = REPO_ROOT / "experiments"
    candidates = [*(REPO_ROOT / "hf_variants" / "lab").rglob("*.py"), studies / "calibration" / "calibrate_embedded.py",
                  *(studies / "glue_after_pretraining").glob("*.py")]  # fmt: skip
    writes = {path.relative_to(REPO_ROOT).as_posix(): lines for path in candidates if (lines := file_writes(path))}
    assert writes == {}
    assert file_writes(REPO_ROOT / "experiments" / "node_nfe" / "node_nfe.py")  # the scan finds a JSON written by hand


#: The one checked writer (hf_variants/storage/files.py): every file the package writes, copies, renames or
#: appends to goes through it.
CHECKED_WRITER = "hf_variants.storage.files"
#: Calls that write, copy or rename a file by themselves: ``os.replace``, ``shutil.copyfile``, ``Path.write_text``...
WRITING_CALLS = {("os", "replace"), ("os", "rename"), ("os", "open"), ("shutil", "copy"), ("shutil", "copy2"),
                 ("shutil", "copyfile"), ("shutil", "copytree"), ("shutil", "move")}  # fmt: skip
WRITING_CALLS |= {("shutil", "rmtree"), ("os", "remove"), ("os", "unlink"), ("os", "rmdir"), ("os", "mkdir"),
                  ("os", "makedirs")}  # removing and creating are writes too
WRITING_METHODS = {"write_text", "write_bytes", "rename", "replace", "symlink_to", "hardlink_to"}  # Path's
#: Path's methods that create or remove without an argument (``folder.mkdir()``, ``path.unlink()``).
MAKING_METHODS = {"mkdir", "unlink", "rmdir", "touch"}


def writes_in(path: Path) -> list[str]:
    """``line: call`` of every write, copy or rename in ``path`` that does not go through the checked writer:
    ``open``/``Path.open`` with a mode that writes, ``Path.write_text``/``write_bytes``/``rename``/``replace``,
    ``os.replace``/``os.rename``/``os.open``, ``shutil.copy*``/``move``."""

    def writing_mode(call: ast.Call, position: int) -> bool:
        modes = [call.args[position]] if len(call.args) > position else []
        modes += [keyword.value for keyword in call.keywords if keyword.arg == "mode"]
        return any(isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax+")
                   for mode in modes)  # fmt: skip

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        if isinstance(function, ast.Name) and function.id == "open" and writing_mode(node, 1):
            found.append(f"{node.lineno}: open(..., {ast.unparse(node.args[1]) if len(node.args) > 1 else 'mode'})")
        elif isinstance(function, ast.Attribute):
            owner = function.value.id if isinstance(function.value, ast.Name) else None
            if (owner, function.attr) in WRITING_CALLS:
                found.append(f"{node.lineno}: {owner}.{function.attr}")
            elif function.attr in WRITING_METHODS and owner not in ("os", "shutil", "dataclasses") and node.args and (
                    function.attr not in ("rename", "replace") or len(node.args) == 1):  # str.replace takes two
                found.append(f"{node.lineno}: .{function.attr}(...)")
            elif function.attr in MAKING_METHODS and owner not in ("os", "shutil"):
                found.append(f"{node.lineno}: .{function.attr}()")
            elif function.attr == "open" and owner not in ("os", "io") and writing_mode(node, 0):
                found.append(f"{node.lineno}: .open({ast.unparse(node.args[0]) if node.args else 'mode'})")
    return found


def test_every_write_goes_through_the_one_checked_writer() -> None:
    """No module but :mod:`hf_variants.storage.files` opens a file to write, copies or renames one itself: each
    write resolves its target inside the folder the command owns and never writes through a link."""
    offenders = {module: found for module, path in module_files().items()
                 if module != CHECKED_WRITER and (found := writes_in(path))}  # fmt: skip
    assert offenders == {}


def test_the_writer_scan_finds_what_it_should(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os, shutil\nopen(p, 'w')\nopen(p)\np.open('a')\np.open()\np.write_text('x')\nos.replace(a, b)\n"
        "shutil.copy2(a, b)\ntext.replace('a', 'b')\nos.open(p, flags)\nopen(p, mode='rb')\np.mkdir(parents=True)\n"
        "p.unlink()\nshutil.rmtree(p)\n"
    )
    assert [entry.split(":")[0] for entry in writes_in(sample)] == ["2", "4", "6", "7", "8", "10", "12", "13", "14"]


def owner_taking_functions(paths: list[Path]) -> dict[str, list[str]]:
    """``{name: [problem, ...]}`` of every function defined in ``paths`` that takes ``within`` (the folder the
    command owns), with what is wrong with its declaration: ``within`` must be keyword-only with no default."""
    found: dict[str, list[str]] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            arguments = node.args
            keyword_only = {argument.arg: default for argument, default in zip(arguments.kwonlyargs,
                                                                               arguments.kw_defaults, strict=True)}
            positional = [argument.arg for argument in [*arguments.posonlyargs, *arguments.args]]
            if "within" not in keyword_only and "within" not in positional:
                continue
            problems = found.setdefault(node.name, [])
            if "within" in positional:
                problems.append(f"{path.name}:{node.lineno}: within is positional")
            elif keyword_only["within"] is not None:
                problems.append(f"{path.name}:{node.lineno}: within has a default")
    return found


def calls_without_owner(path: Path, writers: set[str], *, target_may_own: bool = False) -> list[str]:
    """``line: call`` of every call in ``path`` of a function in ``writers`` that does not name its owner: no
    ``within=``, ``within=None``, or (unless ``target_may_own``: a script whose argument is the file to write) an
    owner made from the target itself (``within=path.parent`` for ``path``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if name not in writers:
            continue
        if any(keyword.arg is None for keyword in node.keywords):
            continue  # **arguments passed on: within is checked where they are made, and required at run time
        owner = next((keyword.value for keyword in node.keywords if keyword.arg == "within"), None)
        if owner is None or (isinstance(owner, ast.Constant) and owner.value is None):
            found.append(f"{node.lineno}: {ast.unparse(node)[:120]}")
        elif not target_may_own and node.args and ast.dump(owner) != ast.dump(node.args[0]) and any(
                ast.dump(part) == ast.dump(node.args[0]) for part in ast.walk(owner)):
            found.append(f"{node.lineno}: {ast.unparse(node)[:120]} (the owner is made from the target)")
    return found


def test_every_writer_names_the_folder_it_owns() -> None:
    """Every function of the package that writes, copies, renames, creates or removes takes ``within`` — the folder
    the command owns — keyword-only with no default, and every call of such a function in the package and the
    repository's scripts names it (not None, not the target's own folder): the containment check is a mechanism
    no caller can skip. The writers are found by their signature, not listed."""
    package = list(module_files().values())
    writers = owner_taking_functions(package)
    assert {"write_bytes_atomic", "write_text_atomic", "write_json", "copy_file", "move_into", "open_for_append",
            "remove_path", "make_folder", "rename_folder", "write_record"} <= set(writers)  # fmt: skip
    assert {name: problems for name, problems in writers.items() if problems} == {}
    offenders = {path.relative_to(REPO_ROOT).as_posix(): found for path in package
                 if (found := calls_without_owner(path, set(writers)))}  # fmt: skip
    offenders |= {path.relative_to(REPO_ROOT).as_posix(): found for path in repository_scripts()
                  if (found := calls_without_owner(path, set(writers), target_may_own=True))}  # fmt: skip
    assert offenders == {}


def test_the_owner_scan_finds_what_it_should(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def write(path, *, within):\n    pass\ndef loose(path, within=None):\n    pass\n"
        "write(p)\nwrite(p, within=None)\nwrite(p, within=p.parent)\nwrite(folder / 'a', within=folder)\n"
        "write(p, within=root)\nwrite(Path(p), within=Path(p).parent)\n"
    )
    assert owner_taking_functions([sample]) == {"write": [], "loose": ["sample.py:3: within is positional"]}
    assert [entry.split(":")[0] for entry in calls_without_owner(sample, {"write"})] == ["5", "6", "7", "10"]


def outcome_constructions(path: Path) -> list[int]:
    """Lines of ``path`` that build a ``RunOutcome`` (by any qualified name)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call) and (
            (isinstance(node.func, ast.Name) and node.func.id == "RunOutcome")
            or (isinstance(node.func, ast.Attribute) and node.func.attr == "RunOutcome"))]  # fmt: skip


def test_every_study_reads_its_records_through_the_one_reader() -> None:
    """A run's record becomes the protocol's ``RunOutcome`` in one place (:mod:`hf_variants.lab.outcomes`, one
    reader over declared field maps): no other module of the package or of the repository's scripts builds one."""
    reader = REPO_ROOT / "hf_variants" / "lab" / "outcomes.py"
    candidates = [*(REPO_ROOT / "hf_variants").rglob("*.py"), *repository_scripts()]
    builders = {path.relative_to(REPO_ROOT).as_posix(): lines for path in candidates
                if path != reader and (lines := outcome_constructions(path))}  # fmt: skip
    assert builders == {}
    assert outcome_constructions(reader)  # the scan finds the reader's


def test_no_tracked_file_is_over_two_megabytes() -> None:
    """Committed records are kept compact (data lives in the shared data folder, read by path): a file over 2 MB
    in the checkout is named here."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, text=True)
    if tracked.returncode:
        pytest.skip("not a git checkout")
    paths = [REPO_ROOT / name for name in tracked.stdout.split("\0") if name]
    assert len(paths) > 100
    large = [path.relative_to(REPO_ROOT) for path in paths if path.is_file() and path.stat().st_size > 2_000_000]
    assert large == []
