"""The ``hf-variants`` command line: one command with a subcommand per job.

    hf-variants pretrain --model_type macaron_bert --train_file corpus.txt ... --output_dir runs/mlm
    hf-variants finetune --model_name_or_path runs/mlm --task_name sst2 ... --output_dir runs/sst2
    hf-variants export runs/sst2 --output_dir hub/sst2 [--repo_id you/name]
    hf-variants push hub/sst2 --repo_id you/name [--local_hub DIR]
    accelerate launch --multi_gpu --num_processes 2 -m hf_variants.cli pretrain ...

This package is the command-line edge and nothing else: ``argv`` is parsed here, into the settings the
library declares (:mod:`hf_variants.settings`, generated flags), and the library's engines run them. The
library never imports this package. ``import hf_variants`` is lazy (it loads torch and the models only
when they are used), so ``hf-variants --help`` and every subcommand's ``--help`` stay fast.

The subcommands and the dispatcher are in :mod:`hf_variants.cli.commands`; :func:`main` is the console
entry point (``hf-variants``), and ``python -m hf_variants.cli`` runs it too.
"""

from .commands import main, run

__all__ = ["main", "run"]
