import os
import re

import pytest

# Side by side (pytest -n), each test process gets its share of the cores: with every process using all of
# them, their thread pools would contend (OpenMP threads spin while they wait) and the suite would run slower
# than in one process. A command a test starts inherits the share.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _WORKERS)))

# The Hub is unreachable on CI machines: every test must work offline.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


# after the environment above, which torch reads when it is first imported
from .mlm_helpers import corpus, pretrained_run, tokenizer_dir  # noqa: E402, F401  (fixtures of the MLM test modules)

#: Set to 1 to run the full suite: also the tests marked ``full`` (every mixed token-mixer × layer-scheme pair
#: through the common suite, torch.compile beyond one model, the compile benchmark, the GPU script's dry
#: run), the common suite on every reading of a pair (:func:`_repeated_readings`) and transformers' half-precision
#: eager-vs-SDPA cases (:data:`HALF_PRECISION_SDPA`). CI sets it. Without it
#: they are deselected, so that the README's ``python -m pytest`` stays within ten minutes on a 2-core machine,
#: each path still tested at least once.
FULL_TESTS_ENV = "HF_VARIANTS_FULL_TESTS"


def _common_suite_key(item: pytest.Item) -> tuple[str, ...] | None:
    """For a test of the common suite (``tests/common.py``), the test and the model type and pair its class
    builds; ``None`` for any other test."""
    from .common import CommonEncoderTests

    if item.cls is None or not issubclass(item.cls, CommonEncoderTests):
        return None
    config = item.cls().config()
    return (item.name, config.model_type, config.attention_type, config.layer_scheme)


def _repeated_readings(items: list[pytest.Item]) -> set[pytest.Item]:
    """The common-suite tests of a class that repeats an earlier class's model type and pair with other field
    values (a reading such as MGK's shifted keys or a fixed-step N-ODE): the default tier runs the common suite
    once per model type and pair, the full suite every reading (each reading's own behaviour has tests of
    its own in its module)."""
    seen: set[tuple[str, ...]] = set()
    repeats = set()
    for item in items:
        key = _common_suite_key(item)
        if key is None:
            continue
        if key in seen:
            repeats.add(item)
        seen.add(key)
    return repeats


#: transformers' eager-vs-SDPA comparisons in half precision: slow on a CPU (emulated bf16/fp16 kernels), a GPU's
#: concern; the float32 cases of the same test run in the default tier.
HALF_PRECISION_SDPA = re.compile(r"test_eager_matches_sdpa_inference_\d+_(bf16|fp16)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(FULL_TESTS_ENV, "") not in ("", "0"):
        return
    repeats = _repeated_readings(items) | {item for item in items if HALF_PRECISION_SDPA.match(item.name)}
    deselected = [item for item in items if item.get_closest_marker("full") is not None or item in repeats]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item.get_closest_marker("full") is None and item not in repeats]


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


@pytest.fixture
def fresh_compiler():
    """A test that compiles flex attention starts from no compiled code: once flex attention was compiled in a
    process for one batch size, torch 2.13's CPU inductor recompiles it for another with a dynamic batch, and the C++
    it generates does not build (``cur_qSplitSize`` undeclared), whatever the mask; which tests share a worker
    process is not fixed."""
    import torch

    torch.compiler.reset()
