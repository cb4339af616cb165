"""The generated step that writes a Hub export's code (``hf_variants.export_code``): only import statements
move, the package's generated modules match the registries, and a module that cannot be flattened is named."""

from __future__ import annotations

import ast

import pytest

from hf_variants import export_code
from hf_variants.core.composition import ATTENTION_TYPES, LAYER_SCHEMES
from hf_variants.core.registration import VARIANTS
from hf_variants.export_code import flatten_module, module_file, registered_imports
from hf_variants.hub import flattened_code_files


def _with_same_folder_imports(tree: ast.Module) -> str:
    """The tree's dump with every relative import written as its same-folder form (an independent reading of
    what flattening must do: the parser's, not the flattener's)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            node.module, node.level = node.module.rsplit(".", 1)[-1], 1
    return ast.dump(tree)


def _every_pair() -> list[tuple[str, str]]:
    return [(mixer, scheme) for mixer in ATTENTION_TYPES for scheme in LAYER_SCHEMES]


@pytest.mark.parametrize("model_type", sorted(VARIANTS))
def test_flattening_moves_import_statements_and_nothing_else(model_type: str) -> None:
    """Every exported file parses to its source's syntax tree once the source's relative imports are written
    in their same-folder form; comments and layout are kept byte for byte outside the import's module path."""
    variant = VARIANTS[model_type]
    sources = {module_file(f"hf_variants.{name}").name: module_file(f"hf_variants.{name}")
               for name in ("core.composition", "core.modeling_encoder", "core.inputs")}  # fmt: skip
    files = flattened_code_files(variant)
    for name, flat in files.items():
        if name.startswith("registered_"):
            continue  # generated for the export (tested below)
        path = sources.get(name) or next(module_file("hf_variants").parent.rglob(name))
        source = path.read_text(encoding="utf-8")
        assert ast.dump(ast.parse(flat)) == _with_same_folder_imports(ast.parse(source)), name
        assert len(flat.splitlines()) == len(source.splitlines()), name
        assert [line for line in flat.splitlines() if "import" not in line] == [
            line for line in source.splitlines() if "import" not in line
        ], name


def test_flattening_keeps_multi_line_imports_and_refuses_a_package_import() -> None:
    source = (
        "from __future__ import annotations\n"
        "from ..inputs import (  # ünïcode comment kept\n"
        "    key_padding_mask,\n"
        ")\n"
        "def f():\n"
        "    from ...hub import flattened_code_files  # imported late\n"
    )
    flat, imported = flatten_module("hf_variants.core.mixers.example", source)
    assert flat == source.replace("from ..inputs", "from .inputs").replace("from ...hub", "from .hub")
    assert sorted(imported) == ["hf_variants.core.inputs", "hf_variants.hub"]
    with pytest.raises(ValueError, match=r"hf_variants.core.example, line 2: hf_variants.core.mixers is not a module"):
        flatten_module("hf_variants.core.example", "import torch\nfrom .mixers import softmax\n")


def test_the_generation_command_rewrites_stale_modules_and_its_check_names_them(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """``python -m hf_variants.export_code`` on a copy of the package's two generated modules, one of them stale
    and the other replaced by a symbolic link: ``--check`` names both and exits 1; the command rewrites them (the
    link itself replaced, never what it points to); then ``--check`` passes."""
    core = tmp_path / "hf_variants" / "core"
    core.mkdir(parents=True)
    monkeypatch.setattr(export_code, "PACKAGE_DIR", tmp_path / "hf_variants")
    monkeypatch.setattr(export_code, "module_file", lambda name: core / f"{name.rsplit('.', 1)[1]}.py")
    generated = {core / f"{name.rsplit('.', 1)[1]}.py": source for name, source in registered_imports().items()}
    stale, linked = generated
    stale.write_text("# an old list\n")
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text("# not the package's\n")
    linked.symlink_to(elsewhere)
    assert export_code.main(["--check"]) == 1
    assert capsys.readouterr().out.splitlines() == [f"stale: hf_variants/core/{path.name}" for path in generated]
    assert export_code.main([]) == 0
    assert {path: path.read_text() for path in generated} == generated and not linked.is_symlink()
    assert elsewhere.read_text() == "# not the package's\n"
    assert export_code.main(["--check"]) == 0


def test_the_packages_registered_modules_are_generated_from_the_registries() -> None:
    """``registered_specs`` / ``registered_implementations`` list every registered idea's modules (rewritten by
    ``python -m hf_variants.export_code``): a registry line added without them fails here."""
    for module_name, generated in registered_imports().items():
        assert module_file(module_name).read_text(encoding="utf-8") == generated, module_name
    listed = ast.parse(module_file("hf_variants.core.registered_specs").read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(listed) if isinstance(node, ast.ImportFrom) and node.level
                for alias in node.names}
    assert imported == {ATTENTION_TYPES.references(name)[0][1] for name in ATTENTION_TYPES} | {
        LAYER_SCHEMES.references(name)[0][1] for name in LAYER_SCHEMES
    }


@pytest.mark.parametrize(("attention_type", "layer_scheme"), _every_pair()[::4])
def test_an_exports_registered_modules_list_its_pair_only(attention_type: str, layer_scheme: str) -> None:
    generated = registered_imports([(attention_type, layer_scheme)])
    expected = {reference for registry, name in ((ATTENTION_TYPES, attention_type), (LAYER_SCHEMES, layer_scheme))
                for reference in registry.references(name)}  # fmt: skip
    listed = {(node.module.rsplit(".", 1)[-1], alias.name) for text in generated.values()
              for node in ast.walk(ast.parse(text)) if isinstance(node, ast.ImportFrom) and node.level
              for alias in node.names}  # fmt: skip
    assert listed == {(module.rsplit(".", 1)[-1], class_name) for module, class_name in expected}
