#!/usr/bin/env python
"""Command-line wrapper of `hf_variants.training.train_tokenizer` (see its docstring, or run with --help)."""

from hf_variants.training.train_tokenizer import main

if __name__ == "__main__":
    main()
