"""The ``hf-variants`` command line: one command with a subcommand per job.

    hf-variants pretrain --model_type macaron_bert --train_file corpus.txt ... --output_dir runs/mlm
    hf-variants finetune --model_name_or_path runs/mlm --task_name sst2 ... --output_dir runs/sst2
    hf-variants export runs/sst2 --output_dir hub/sst2 [--repo_id you/name]
    hf-variants push hub/sst2 --repo_id you/name [--local_hub DIR]

This package is the command-line edge and nothing else: it parses arguments and imports the library
(:mod:`hf_variants`) only to run a job. It is a top-level package of its own because ``import
hf_variants`` registers every model with the transformers Auto classes, which imports torch and
transformers' modelling code; ``hf-variants --help`` and every subcommand's ``--help`` do not.

The dispatcher is :mod:`hf_variants_cli.main`; the other modules define each command's arguments, and
the engines import those (this ``__init__`` imports nothing, so that they can).
"""
