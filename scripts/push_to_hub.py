#!/usr/bin/env python
"""Push an hf-variants model folder to the Hugging Face Hub.

Either push a folder written by ``hf_variants.hub.export_for_hub``::

    python scripts/push_to_hub.py --folder exported/ --repo_id you/macaron-bert-small

or export a ``save_pretrained`` checkpoint (and its tokenizer, if saved beside it) first::

    python scripts/push_to_hub.py --checkpoint runs/mlm/final --folder exported/ --repo_id you/macaron-bert-small

The upload is one commit with ``huggingface_hub.HfApi`` (``create_repo`` + ``create_commit``), so the
rendered model card is kept. Authentication is the usual ``HF_TOKEN`` / ``hf auth login``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import huggingface_hub


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--folder", type=Path, required=True, help="Hub folder to push (written first with --checkpoint)."
    )
    parser.add_argument("--repo_id", required=True, help="Target repository, e.g. 'you/macaron-bert-small'.")
    parser.add_argument("--checkpoint", type=Path, help="A save_pretrained checkpoint to export into --folder first.")
    parser.add_argument("--private", action="store_true", help="Create the repository as private.")
    parser.add_argument("--token", default=None, help="Hub token (default: HF_TOKEN or the stored login).")
    parser.add_argument("--commit_message", default="Upload hf-variants model")
    return parser.parse_args(argv)


def export_checkpoint(checkpoint: Path, folder: Path, repo_id: str) -> Path:
    """Load a checkpoint with the Auto class of its saved architecture and export it for the Hub."""
    import transformers

    import hf_variants  # noqa: F401  (registers the variants)
    from hf_variants.core.registration import VARIANTS
    from hf_variants.hub import export_for_hub

    config = transformers.AutoConfig.from_pretrained(checkpoint)
    if config.model_type not in VARIANTS:
        raise SystemExit(f"{checkpoint} holds a {config.model_type!r} model, not an hf-variants model.")
    architecture = (config.architectures or ["AutoModel"])[0]
    variant = VARIANTS[config.model_type]
    auto_name = next((name for name, cls in variant.models.items() if cls.__name__ == architecture), "AutoModel")
    model = getattr(transformers, auto_name).from_pretrained(checkpoint)
    tokenizer = None
    if (checkpoint / "tokenizer.json").is_file() or (checkpoint / "tokenizer_config.json").is_file():
        tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
    return export_for_hub(model, folder, tokenizer, repo_id=repo_id)


def main(argv: Sequence[str] | None = None, api: huggingface_hub.HfApi | None = None) -> str:
    from hf_variants.hub import push_folder_to_hub

    args = parse_args(argv)
    if args.checkpoint is not None:
        export_checkpoint(args.checkpoint, args.folder, args.repo_id)
    repo_id = push_folder_to_hub(
        args.folder,
        args.repo_id,
        token=args.token,
        private=args.private,
        commit_message=args.commit_message,
        api=api,
    )
    print(f"Pushed {args.folder} to https://huggingface.co/{repo_id}")
    return repo_id


if __name__ == "__main__":
    main()
