"""Every setting of the engines and of the main job, declared once: dataclass fields with their help and
their checks (:mod:`.arguments`), from which the command line's flags are generated.

- :mod:`.pretraining`: ``PretrainingArguments`` (``hf-variants pretrain``, ``run_mlm.run``)
- :mod:`.finetuning`: ``ModelArguments``, ``DataTrainingArguments``, ``RunArguments`` (``hf-variants
  finetune``, ``run_glue.run``, with transformers' ``TrainingArguments``)
- :mod:`.tokenizer`: ``TokenizerArguments`` (``hf-variants train-tokenizer``)
- :mod:`.compare`: ``CompareArguments`` and the presets (``hf-variants compare``)

These modules import neither torch nor transformers (tests/test_layout.py), so that ``--help`` is fast.
"""
