"""The front door and the documentation: the README is short and its quickstart runs; the release
files agree with the package's version; every variant has its page. (CI builds the site itself with
``mkdocs build --strict``.)"""

from __future__ import annotations

import ast
import json
import re
from importlib import metadata

import yaml

import hf_variants

from .helpers import REPO_ROOT, load_script, run_python

README = (REPO_ROOT / "README.md").read_text()


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_the_readme_is_the_short_front_door() -> None:
    assert len(README.splitlines()) <= 250
    top = "\n".join(README.splitlines()[:30])
    assert "hf-variants compare --output_dir outputs/compare" in top and "python -m pytest" in top


def test_the_quickstart_is_one_block_and_it_runs(tmp_path) -> None:
    (readme_block,) = python_blocks(README)
    (page_block,) = python_blocks((REPO_ROOT / "docs" / "quickstart.md").read_text())
    assert readme_block == page_block
    assert len(readme_block.strip().splitlines()) <= 16
    listing = "import json, pathlib\nprint(json.dumps(sorted(p.name for p in pathlib.Path('out/hub').iterdir())))\n"
    script = readme_block + "\n" + listing
    result = run_python(script, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    exported = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"config.json", "model.safetensors", "README.md", "tokenizer.json", "modeling_strang.py"} <= set(exported)
    (answers,) = [line for line in result.stdout.splitlines() if line.startswith("[{'label'")]
    answers = ast.literal_eval(answers)  # the model learned: both sentences right, confidently, in eval mode
    assert [answer["label"] for answer in answers] == ["positive", "negative"]
    assert all(answer["score"] >= 0.9 for answer in answers), answers


def test_release_files_carry_the_package_version() -> None:
    version = metadata.version("hf-variants")
    citation = yaml.safe_load((REPO_ROOT / "CITATION.cff").read_text())
    assert str(citation["version"]) == version
    headings = re.findall(r"^## \[(.+?)\]", (REPO_ROOT / "CHANGELOG.md").read_text(), flags=re.MULTILINE)
    releases = [heading for heading in headings if heading != "Unreleased"]  # Keep a Changelog's top section
    assert releases[0] == version
    assert "Apache License" in (REPO_ROOT / "LICENSE").read_text()[:200]


def test_every_variant_has_a_page_in_the_site_navigation() -> None:
    class Loader(yaml.SafeLoader):  # mkdocs.yml may carry !!python tags; none are needed here
        pass

    site = yaml.load((REPO_ROOT / "mkdocs.yml").read_text(), Loader=Loader)
    listed = json.dumps(site["nav"])
    for model_type in hf_variants.VARIANTS:
        page = REPO_ROOT / "docs" / "variants" / f"{model_type}.md"
        assert "<!-- BEGIN generated: model-card -->" in page.read_text()  # filled by tools/render_tables.py
        assert f"variants/{model_type}.md" in listed


def test_the_recipe_for_a_new_layer_scheme_runs(tmp_path) -> None:
    """docs/mix-and-match.md's recipe, run as a user would: a scheme registered from outside the package is
    built under two token mixers, gets its matched control, and its own validation runs where it is selected."""
    (recipe,) = [block for block in python_blocks((REPO_ROOT / "docs" / "mix-and-match.md").read_text())
                 if "LAYER_SCHEMES[" in block]  # fmt: skip
    result = run_python(recipe, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "layer_norm_position must be 'pre'" in result.stdout


def test_docstring_roles_render_as_code_linked_where_documented() -> None:
    """The site's hook turns the Sphinx roles mkdocstrings leaves as text into code, linked to the object's
    heading when exactly one documented object on the page ends with the name (CI also greps the built
    site for any role left)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("mkdocs_hooks", REPO_ROOT / "tools" / "mkdocs_hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    html = ('<h3 id="hf_variants.training.run_mlm.run">run</h3><h3 id="hf_variants.training.run_glue.run">run</h3>'
            '<h3 id="hf_variants.settings.corpus.CorpusArguments">CorpusArguments</h3>'
            '<p>:class:<code>~.corpus.CorpusArguments</code>, :func:<code>run_mlm.run</code>, '
            ':func:<code>run</code>, :mod:<code>hf_variants.lab</code></p>')  # fmt: skip
    rendered = hooks.on_page_content(html, None, None, None)
    assert '<a href="#hf_variants.settings.corpus.CorpusArguments"><code>CorpusArguments</code></a>' in rendered
    assert '<a href="#hf_variants.training.run_mlm.run"><code>run_mlm.run</code></a>' in rendered
    assert ", <code>run</code>, <code>hf_variants.lab</code></p>" in rendered  # ambiguous / not on the page
    assert not re.search(r":(func|class|mod):", rendered)


def test_no_page_names_the_ci_machines_data_folder() -> None:
    """A user has no ``../shared``: the pages, the README and the docstrings the API reference renders write a
    data folder as ``$DATA`` ([Data](data.md) says how to fill it). Excepted: development.md (the CI machine's
    own notes) and the reports ``hf-variants compare`` wrote (records of the command as it was run)."""
    package = REPO_ROOT / "hf_variants"
    candidates = [REPO_ROOT / "README.md", *(REPO_ROOT / "docs").rglob("*.md"), *package.rglob("*.py"),
                  *(package / "model_cards").glob("*.md")]  # fmt: skip
    naming = [path.relative_to(REPO_ROOT).as_posix() for path in candidates
              if path.name != "development.md" and "../shared" in (text := path.read_text(encoding="utf-8"))
              and not text.startswith("# hf-variants compare\n")]  # fmt: skip
    assert naming == []


def pages_saying(pattern: str) -> dict[str, str]:
    """Page → the first match of ``pattern`` (case-insensitive) in the README, every docs page (committed reports
    included) and every model card."""
    pages = [REPO_ROOT / "README.md", *(REPO_ROOT / "docs").rglob("*.md"),
             *(REPO_ROOT / "hf_variants" / "model_cards").glob("*.md")]  # fmt: skip
    return {path.relative_to(REPO_ROOT).as_posix(): match.group(0) for path in pages
            if (match := re.search(pattern, path.read_text(encoding="utf-8"), re.IGNORECASE))}  # fmt: skip


def test_no_page_carries_the_projects_bookkeeping() -> None:
    """Words from the project's own bookkeeping mean nothing to a user: no issue numbers, no "the issue's bar",
    no machine that was or was not "lent"."""
    assert pages_saying(r"\bissue\s*#?\d+|\bthe issue's\b|\blent\b") == {}


def test_no_page_report_or_card_claims_no_difference_without_an_equivalence_test() -> None:
    """An interval that holds 0 bounds nothing beyond its ends: only an equivalence test against a declared margin
    says "equivalent within ±m". No page, committed report or model card says "no difference" or
    "indistinguishable" (``hf_variants.lab.verdicts`` gives the words: above, below, equivalent within ±m, not
    resolved, not comparable)."""
    assert pages_saying(r"\bno (?:significant |real |practical |detectable )?difference\b|\bindistinguishable\b") == {}


def test_no_page_speaks_of_the_machine_or_the_sessions_the_work_was_done_in() -> None:
    """A user has their own machine: a page says what a measurement ran on ("a 2-core CPU", "an H200"), never "this
    machine", the project's sessions or a borrowed GPU."""
    assert pages_saying(r"\bthis (?:2-core |project's )?(?:CPU |GPU )?machine\b|\bthis machine's\b|\bthis 2-core\b|"
                        r"\bthis project's\b|\bsessions?\b|\bborrowed\b") == {}


def test_model_cards_put_usage_first_keep_limitations_short_and_link_their_findings() -> None:
    """A card is for the person who downloads the model: usage is its first section, "Limitations" at most ten
    lines, no running count ("so far"), and the comparisons with the matched control by link to the findings page."""
    from hf_variants.hub import project_url, render_model_card

    for model_type, variant in hf_variants.VARIANTS.items():
        card = str(render_model_card(variant, variant.config_class(), repo_id=model_type))
        sections = re.findall(r"(?m)^## (.+)$", card)
        assert sections[0] == "Usage", (model_type, sections)
        limitations = card.split("## Limitations\n", 1)[1].split("\n## ", 1)[0]
        assert 0 < len([line for line in limitations.splitlines() if line.strip()]) <= 10, model_type
        assert "so far" not in card and f"]({project_url('Documentation')}findings/)" in card, model_type


def test_the_command_line_reference_documents_every_flag_of_every_command() -> None:
    """docs/cli.md is what the commands' parsers give (tools/cli_reference.py): a flag added, renamed or re-worded
    without regenerating it fails here, and every flag of every command is on it."""
    from hf_variants.cli.commands import COMMANDS

    tool = load_script("tools/cli_reference")
    page = (REPO_ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for name, command in COMMANDS.items():
        # finetune's parser is transformers' HfArgumentParser, whose spelling of a flag may vary with its version
        # (both ends of the range are tested): its flags are checked one by one below
        assert name == "finetune" or tool.command_section(name) in page, f"run python tools/cli_reference.py ({name})"
        for action in command.parser()._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help") and "-" not in flag[2:]:
                    assert f"`{flag}`" in page, (name, flag)


def test_a_stated_page_time_belongs_to_the_page_as_it_is() -> None:
    """Each page's run time is rendered from a record that names the code blocks it was measured on: the committed
    record matches the pages, prose may change without re-timing, a changed block may not (the render refuses)."""
    pages = load_script("benchmarks/benchmark_pages")
    record = json.loads((REPO_ROOT / "benchmarks" / "records" / "page_times.json").read_text(encoding="utf-8"))
    assert sorted(record["pages"]) == sorted(pages.PAGES)
    for name, times in record["pages"].items():
        text = (REPO_ROOT / name).read_text(encoding="utf-8")
        assert times["blocks_sha256"] == pages.blocks_digest(text), f"{name} changed since it was timed"
        assert pages.blocks_digest(text.replace("\n\n", "\n\nOne more sentence of prose.\n\n", 1)) == times[
            "blocks_sha256"]
        assert pages.blocks_digest(text + "\n```bash\necho one more step\n```\n") != times["blocks_sha256"]


#: A generated block of a page (tools/render_tables.py fills it from the committed records).
GENERATED_BLOCK = re.compile(r"<!-- BEGIN generated: ([\w.-]+) -->\n(.*?)<!-- END generated: \1 -->", re.DOTALL)
#: An effect with its interval as the pages write it: ``-1.3 [-2.0, -0.6]`` (a typographic minus too).
STATED_INTERVAL = re.compile(r"([+\-−]?\d+(?:\.\d+)?) \[([+\-−]?\d+(?:\.\d+)?), ([+\-−]?\d+(?:\.\d+)?)\]")


def stated_intervals(text: str) -> set[tuple[float, float, float]]:
    return {tuple(float(number.replace("−", "-")) for number in found.groups())
            for found in STATED_INTERVAL.finditer(text)}  # fmt: skip


def test_every_interval_a_pages_prose_states_is_one_its_rendered_records_give() -> None:
    """A sentence may quote an interval only as the page's own generated blocks give it from the records (the
    renderer's current output, not the committed text), so a record re-made under it fails here until the sentence
    is rewritten. Pages rendered whole (the findings page, the study pages) are checked by the renderer's own test."""
    rendered = load_script("tools/render_tables").rendered_pages()
    pages = [*sorted((REPO_ROOT / "docs").rglob("*.md")), REPO_ROOT / "README.md",
             *sorted((REPO_ROOT / "hf_variants" / "model_cards").glob("*.md"))]  # fmt: skip
    checked = 0
    for page in pages:
        text = rendered.get(page, page.read_text(encoding="utf-8"))
        if page in rendered and "<!-- BEGIN generated:" not in text:
            continue  # rendered whole
        blocks = stated_intervals("".join(block for _, block in GENERATED_BLOCK.findall(text)))
        prose = stated_intervals(GENERATED_BLOCK.sub("", text))
        assert prose <= blocks, f"{page.relative_to(REPO_ROOT)} states {sorted(prose - blocks)} by hand"
        checked += len(prose)
    assert checked >= 50  # the results page's discussion quotes its tables
