"""``hf-variants info``: registered model types, library versions and the compute device."""

from __future__ import annotations

import json
import os
import platform
from importlib import metadata
from typing import Any

from ..settings.arguments import ArgumentParser

LIBRARIES = ("hf-variants", "torch", "transformers", "accelerate", "datasets", "evaluate", "huggingface_hub",
             "tokenizers", "torchdiffeq")  # fmt: skip


def info() -> dict[str, Any]:
    """Registered model types with their Auto classes, versions and the compute device."""
    import torch

    import hf_variants

    from ..settings.compare import DATA_ENV

    versions = {"python": platform.python_version()}
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


def info_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="hf-variants info", description=__doc__.split(": ", 1)[1])
    parser.add_argument("--json", action="store_true", help="Print the details as JSON.")
    return parser


def run(argv: list[str]) -> dict[str, Any]:
    args = info_parser().parse_args(argv)
    details = info()
    if args.json:
        print(json.dumps(details, indent=2))
        return details
    print("hf-variants model types:")
    for name, entry in details["model_types"].items():
        print(f"  {name:18s} {entry['config']}: {', '.join(entry['auto_classes'].values())}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in details["versions"].items()))
    print(f"device: {details['device']}")
    print(f"data: {details['data']}")
    return details
