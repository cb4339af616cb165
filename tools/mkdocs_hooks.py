"""mkdocs hooks, and the text of a variant's page. A variant's page is its model card (one source for both),
rendered from the package's template for the variant's default config, without the sections that describe one
checkpoint (its usage section says how to get weights: no checkpoint is published): :func:`card_body`, which
``tools/render_tables.py`` writes into the page's ``model-card`` block, so the page reads the same on GitHub.
"""

from __future__ import annotations

import re

GENERATED_MARKER = re.compile(r"^<!-- (?:BEGIN|END) generated: [\w-]+ -->\n", re.MULTILINE)
CHECKPOINT_SECTIONS = re.compile(r"^## This checkpoint\n.*?(?=^## Limitations)", re.DOTALL | re.MULTILINE)
USAGE_SECTION = re.compile(r"^## Usage\n.*?(?=^## )", re.DOTALL | re.MULTILINE)

#: A variant's page has no checkpoint to load: it says how to get weights instead of the card's usage.
GETTING_WEIGHTS = """\
## Getting weights

No checkpoint of this variant is published yet: pretrain one with the package (the
[pretraining page](../pretraining.md) has the options; [data](../data.md) says where to get a corpus), then
load it from its folder with the Auto classes, as any model:

```bash
pip install "hf-variants @ git+{repository}"
hf-variants pretrain --model_type {model_type} --train_file train.txt --train_tokenizer_vocab_size 8000 \\
    --max_train_steps 1000 --output_dir runs/{model_type}
```

```python
import hf_variants  # registers the model types with the Auto classes
from transformers import AutoModelForMaskedLM

model = AutoModelForMaskedLM.from_pretrained("runs/{model_type}")
```

`hf-variants export runs/{model_type} --output_dir hub/{model_type}` writes a folder for the Hub whose card is
this page's text with the checkpoint's own sections; it loads with `trust_remote_code=True` on a machine
without the package.

"""


def card_body(model_type: str) -> str:
    import hf_variants
    from hf_variants.hub import project_url, render_model_card

    variant = hf_variants.VARIANTS[model_type]
    text = str(render_model_card(variant, variant.config_class(), repo_id=model_type))
    text = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.DOTALL)  # the Hub's YAML metadata
    text = re.sub(r"\A\s*# .*\n", "", text)  # the page has its own title
    text = CHECKPOINT_SECTIONS.sub("", text)
    repository = project_url("Repository")
    text = USAGE_SECTION.sub(lambda _: GETTING_WEIGHTS.format(model_type=model_type, repository=repository), text)
    site = re.escape(project_url("Documentation"))
    text = re.sub(rf"\]\({site}([\w-]+)/\)", r"](../\1.md)", text)  # the site's own pages, as relative links
    text = re.sub(rf"\]\({site}\)", "](../index.md)", text)
    text = GENERATED_MARKER.sub("", text)  # the card's own generated blocks are text here
    return re.sub(r"(?m)^(#{2,5}) ", r"#\1 ", text).strip() + "\n"  # headings one level down


#: A Sphinx cross-reference role as mkdocstrings leaves it in the HTML: ``:func:`~.x.run``` renders as
#: ``:func:<code>~.x.run</code>``.
SPHINX_ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|exc|obj):<code>([^<]+)</code>")
ANCHOR = re.compile(r'\bid="([\w.]+)"')


def resolve_role(target: str, anchors: list[str]) -> str:
    """The role's target as code, linked to the object's heading on the same page when exactly one
    documented object ends with it (``~`` shows the last name only; a leading ``.`` is relative)."""
    shown = target.lstrip("~").lstrip(".")
    name = shown.rsplit(".", 1)[-1] if target.startswith("~") else shown
    matches = [anchor for anchor in anchors if anchor == shown or anchor.endswith("." + shown)]
    code = f"<code>{name}</code>"
    return f'<a href="#{matches[0]}">{code}</a>' if len(matches) == 1 else code


def on_page_content(html: str, page, config, files) -> str:
    """Docstrings' Sphinx roles as code, linked where the object is documented on the page."""
    anchors = ANCHOR.findall(html)
    return SPHINX_ROLE.sub(lambda match: resolve_role(match.group(1), anchors), html)
