"""mkdocs hook: a variant's page is its model card (one source for both), rendered from the package's
template for the variant's default config, without the sections that describe one checkpoint.

A page marks the place with ``<!-- model-card: MODEL_TYPE -->`` (docs/variants/*.md).
"""

from __future__ import annotations

import re

MARKER = re.compile(r"<!-- model-card: (\w+) -->")
CHECKPOINT_SECTIONS = re.compile(r"^## This checkpoint\n.*?(?=^## Intended use)", re.DOTALL | re.MULTILINE)


def card_body(model_type: str) -> str:
    import hf_variants
    from hf_variants.hub import project_url, render_model_card

    variant = hf_variants.VARIANTS[model_type]
    text = str(render_model_card(variant, variant.config_class(), repo_id=f"your-name/{model_type}"))
    text = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.DOTALL)  # the Hub's YAML metadata
    text = re.sub(r"\A\s*# .*\n", "", text)  # the page has its own title
    text = CHECKPOINT_SECTIONS.sub("", text)
    site = re.escape(project_url("Documentation"))
    text = re.sub(rf"\]\({site}([\w-]+)/\)", r"](../\1.md)", text)  # the site's own pages, as relative links
    text = re.sub(rf"\]\({site}\)", "](../index.md)", text)
    return re.sub(r"(?m)^(#{2,5}) ", r"#\1 ", text).strip() + "\n"  # headings one level down


def on_page_markdown(markdown: str, page, config, files) -> str:
    return MARKER.sub(lambda match: card_body(match.group(1)), markdown)

