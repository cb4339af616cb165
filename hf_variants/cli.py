"""The ``hf-variants`` command.

    hf-variants compare [--data_dir DIR] [--models ...] [--output_dir outputs/compare]
    hf-variants info
    hf-variants export CHECKPOINT --output_dir DIR [--repo_id you/name] [--push]

``compare`` is the main job (see :mod:`hf_variants.compare`); ``info`` lists the registered model
types, library versions and the device; ``export`` writes a checkpoint as a Hub folder with its
model card (and pushes it with ``--push``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

LIBRARIES = ("torch", "transformers", "accelerate", "datasets", "evaluate", "huggingface_hub", "tokenizers",
             "torchdiffeq")  # fmt: skip


def info() -> dict[str, Any]:
    """Registered model types with their Auto classes, versions and the compute device."""
    import torch

    import hf_variants
    from hf_variants.compare import DATA_ENV

    versions = {"hf_variants": hf_variants.__version__, "python": platform.python_version()}
    versions.update({name: metadata.version(name) for name in LIBRARIES})
    if torch.cuda.is_available():
        device = f"cuda: {torch.cuda.get_device_name(0)} ({torch.cuda.device_count()} device(s))"
    else:
        device = f"cpu: {os.cpu_count()} cores, torch uses {torch.get_num_threads()} threads"
    return {
        "model_types": {
            name: {"config": variant.config_class.__name__,
                   "auto_classes": {auto: cls.__name__ for auto, cls in variant.models.items()}}
            for name, variant in sorted(hf_variants.VARIANTS.items())
        },
        "versions": versions,
        "device": device,
        "data": os.environ.get(DATA_ENV) or f"${DATA_ENV} not set",
    }  # fmt: skip


def print_info() -> None:
    details = info()
    print("hf-variants model types:")
    for name, entry in details["model_types"].items():
        print(f"  {name:18s} {entry['config']}: {', '.join(entry['auto_classes'].values())}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in details["versions"].items()))
    print(f"device: {details['device']}")
    print(f"data: {details['data']}")


def auto_class_for(config) -> type:
    """The Auto class registered for the checkpoint's saved head (``architectures[0]``)."""
    import transformers

    from hf_variants.core.registration import VARIANTS

    if config.model_type not in VARIANTS:
        raise ValueError(f"model_type {config.model_type!r} is not an hf-variants model; export writes their cards.")
    architecture = (getattr(config, "architectures", None) or [""])[0]
    models = VARIANTS[config.model_type].models
    auto_name = next((auto for auto, cls in models.items() if cls.__name__ == architecture), "AutoModel")
    return getattr(transformers, auto_name)


def export(argv: Sequence[str]) -> Path:
    """Hub folder of a checkpoint; GLUE dev results in its ``results.json`` (run_glue) go in the card."""
    parser = argparse.ArgumentParser(prog="hf-variants export", description="Write a checkpoint as a Hub folder.")
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--output_dir", type=Path, required=True)
    parser.add_argument("--repo_id", help="The Hub repository the card names (and --push uploads to).")
    parser.add_argument("--push", action="store_true", help="Upload the folder to --repo_id.")
    args = parser.parse_args(argv)
    if args.push and not args.repo_id:
        parser.error("--push needs --repo_id")
    if not (args.checkpoint / "config.json").is_file():
        raise FileNotFoundError(f"{args.checkpoint} is not a checkpoint folder (no config.json).")

    from transformers import AutoConfig, AutoTokenizer

    import hf_variants  # noqa: F401
    from hf_variants.hub import export_for_hub, push_folder_to_hub
    from hf_variants.training.run_glue import task_results

    config = AutoConfig.from_pretrained(args.checkpoint)
    model = auto_class_for(config).from_pretrained(args.checkpoint)
    tokenizer = (
        AutoTokenizer.from_pretrained(args.checkpoint) if (args.checkpoint / "tokenizer.json").is_file() else None
    )
    results, datasets, summary = [], None, None
    results_file = args.checkpoint / "results.json"
    if results_file.is_file():
        recorded = json.loads(results_file.read_text())
        if recorded.get("task"):
            results, datasets = task_results(recorded["task"], recorded), ["nyu-mll/glue"]
            summary = f"Fine-tuned on GLUE {recorded['task']} (`{recorded.get('command', '')}`)."
        elif "perplexity" in recorded:
            steps, perplexity = recorded["steps"], recorded["perplexity"]
            summary = f"Pretrained with MLM for {steps} steps; validation perplexity {perplexity:.2f}."
    folder = export_for_hub(model, args.output_dir, tokenizer, repo_id=args.repo_id, datasets=datasets,
                            results=results, training_summary=summary)  # fmt: skip
    print(f"Wrote {folder} ({type(model).__name__}).")
    if args.push:
        push_folder_to_hub(folder, args.repo_id)
        print(f"Pushed to https://huggingface.co/{args.repo_id}")
    return folder


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"compare", "info", "export"}
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in commands:
        print(__doc__.strip())
        if argv and argv[0] not in ("-h", "--help"):
            raise SystemExit(f"hf-variants: unknown command {argv[0]!r}; choose from {', '.join(sorted(commands))}.")
        return
    command, rest = argv[0], argv[1:]
    if command == "compare":
        from hf_variants.compare import main as compare_main

        compare_main(rest)
    elif command == "info":
        print_info()
    else:
        export(rest)


if __name__ == "__main__":
    main()
