"""``hf-variants export`` and ``hf-variants push``: a checkpoint as a Hub folder, and its upload."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..settings.arguments import ArgumentParser, HelpFormatter

EXPORT_DESCRIPTION = """\
Write a checkpoint folder (save_pretrained, run_mlm or run_glue output) as a Hub folder: weights,
config with auto_map, the modelling code it needs, the tokenizer and a model card. The folder loads with
trust_remote_code=True on a machine without hf-variants. A run_glue results.json beside the weights puts
its dev scores in the card's model-index. The output folder must be new, empty or a previous export (replaced
only with --overwrite_output_dir); it never overlaps the checkpoint.
"""

PUSH_DESCRIPTION = """\
Upload a Hub folder (written by 'hf-variants export') to the Hub in one commit with
huggingface_hub.HfApi.create_commit: exactly the files its manifest (hf_variants_manifest.json) lists,
each checked first (size and SHA-256); a folder holding any other file is refused. Authentication is the
usual HF_TOKEN or 'hf auth login'. --local_hub DIR writes the same files to DIR/<repo_id>/ instead (no
network), a folder that from_pretrained loads like the Hub repository.
"""


def export_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="hf-variants export", description=EXPORT_DESCRIPTION,
                                     formatter_class=HelpFormatter)  # fmt: skip
    parser.add_argument("checkpoint", type=Path, help="A folder with config.json and the weights.")
    parser.add_argument("--output_dir", type=Path, required=True, help="The Hub folder to write.")
    parser.add_argument("--repo_id", help="The Hub repository the card names (and --push uploads to).")
    parser.add_argument("--push", action="store_true", help="Upload the folder to --repo_id afterwards.")
    parser.add_argument("--local_hub", type=Path, help="With --push: write to this folder instead of the Hub.")
    parser.add_argument("--overwrite_output_dir", action="store_true",
                        help="Replace a previous export in --output_dir (never a folder hf-variants did not write).")
    return parser


def push_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="hf-variants push", description=PUSH_DESCRIPTION,
                                     formatter_class=HelpFormatter)  # fmt: skip
    parser.add_argument("folder", type=Path, help="A folder written by 'hf-variants export'.")
    parser.add_argument("--repo_id", required=True, help="Target repository, e.g. you/macaron-bert-small.")
    parser.add_argument("--private", action="store_true", help="Create the repository as private.")
    parser.add_argument("--token", help="Hub token (default: HF_TOKEN or the stored login).")
    parser.add_argument("--commit_message", default="Upload hf-variants model", help="The commit's message.")
    parser.add_argument("--local_hub", type=Path, help="Write to DIR/<repo_id>/ instead of the Hub.")
    parser.add_argument("--unverified_folder", action="store_true",
                        help="Upload a folder without an export's manifest: its regular files as they are (no link, "
                        "no hidden file), unchecked.")
    return parser


def export(argv: list[str]) -> Path:
    """Hub folder of a checkpoint; GLUE dev results in its ``results.json`` (run_glue) go in the card."""
    parser = export_parser()
    args = parser.parse_args(argv)
    if args.push and not args.repo_id:
        parser.error("--push needs --repo_id")
    if not (args.checkpoint / "config.json").is_file():
        parser.error(f"{args.checkpoint} is not a checkpoint folder (no config.json)")

    from ..hub import export_checkpoint
    from ..storage.record_schema import ANY_OBJECT, parse_record

    results_file = args.checkpoint / "results.json"
    recorded = parse_record(results_file, ANY_OBJECT) if results_file.is_file() else None
    folder = export_checkpoint(args.checkpoint, args.output_dir, repo_id=args.repo_id, recorded=recorded,
                               overwrite=args.overwrite_output_dir)  # fmt: skip
    print(f"Wrote {folder}.")
    if args.push:
        _push_folder(folder, args.repo_id, local_hub=args.local_hub)
    return folder


def push(argv: list[str]) -> str:
    args = push_parser().parse_args(argv)
    return _push_folder(args.folder, args.repo_id, local_hub=args.local_hub, token=args.token, private=args.private,
                        commit_message=args.commit_message, unverified=args.unverified_folder)  # fmt: skip


def _push_folder(folder: Path, repo_id: str, *, local_hub: Path | None = None, **options) -> str:
    from ..hub import LocalHub, push_folder_to_hub

    api = LocalHub(local_hub) if local_hub is not None else None
    pushed = push_folder_to_hub(folder, repo_id, api=api, **options)
    where = local_hub / pushed if local_hub is not None else f"https://huggingface.co/{pushed}"
    print(f"Pushed {folder} to {where}")
    return pushed


VERIFY_DESCRIPTION = """\
Check a folder written by hf-variants (pretrain, finetune or export) against its manifest
(hf_variants_manifest.json): every file it lists is present, with its size and SHA-256. Exit status 1
names the first file that is missing, truncated or altered.
"""


def verify_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="hf-variants verify", description=VERIFY_DESCRIPTION,
                                     formatter_class=HelpFormatter)  # fmt: skip
    parser.add_argument("folder", type=Path, help="A model folder written by hf-variants.")
    return parser


def verify(argv: list[str]) -> dict:
    parser = verify_parser()
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        parser.error(f"{args.folder} is not a folder")

    from ..storage.files import CheckpointError
    from ..storage.run_folder import MANIFEST_FILE, verify_manifest

    try:
        manifest = verify_manifest(args.folder)
        if manifest is not None and manifest["written_by"].endswith(" export"):  # what push would upload
            from ..hub import check_nothing_unlisted

            check_nothing_unlisted(args.folder.resolve(), manifest)
    except CheckpointError as error:
        raise SystemExit(f"hf-variants verify: {error}") from None
    if manifest is None:
        raise SystemExit(f"hf-variants verify: {args.folder} has no {MANIFEST_FILE}: hf-variants did not write it.")
    print(f"{args.folder}: {len(manifest['files'])} files match {MANIFEST_FILE} ({manifest['written_by']}).")
    return manifest
