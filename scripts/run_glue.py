#!/usr/bin/env python
"""Command-line wrapper of `hf_variants.training.run_glue` (see its docstring, or run with --help)."""

from hf_variants.training.run_glue import main

if __name__ == "__main__":
    main()
