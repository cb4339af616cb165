import os

# The Hub is unreachable on CI machines: every test must work offline.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


from .mlm_helpers import corpus, tokenizer_dir  # noqa: F401  (fixtures shared by the MLM test modules)
