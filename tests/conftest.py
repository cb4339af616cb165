import os

import pytest

# The Hub is unreachable on CI machines: every test must work offline.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


from .mlm_helpers import corpus, pretrained_run, tokenizer_dir  # noqa: F401  (fixtures shared by the MLM test modules)


@pytest.fixture(autouse=True)
def _restore_logging_verbosity():
    """A Trainer sets transformers' (and datasets') log level process-wide from its ``log_level``; a test that
    builds one (``log_level="error"``) would otherwise silence the warnings later tests capture (the
    common suite's "Reinit due to size mismatch")."""
    import datasets
    import transformers

    levels = transformers.utils.logging.get_verbosity(), datasets.utils.logging.get_verbosity()
    yield
    transformers.utils.logging.set_verbosity(levels[0])
    datasets.utils.logging.set_verbosity(levels[1])
