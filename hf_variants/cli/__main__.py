"""``python -m hf_variants.cli`` (and ``accelerate launch -m hf_variants.cli``) runs the ``hf-variants`` command."""

from . import main

main()
