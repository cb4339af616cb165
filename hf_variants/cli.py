"""``python -m hf_variants.cli`` runs the ``hf-variants`` command (defined in :mod:`hf_variants_cli.main`).

    accelerate launch --num_processes 2 -m hf_variants.cli pretrain ...
"""

from hf_variants_cli.main import main

if __name__ == "__main__":
    main()
