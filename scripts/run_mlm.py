#!/usr/bin/env python
"""Command-line wrapper of `hf_variants.training.run_mlm` (see its docstring, or run with --help)."""

from hf_variants.training.run_mlm import main

if __name__ == "__main__":
    main()
