"""``python -m hf_variants_cli`` (and ``accelerate launch -m hf_variants_cli``) runs the ``hf-variants`` command."""

from hf_variants_cli.main import main

main()
