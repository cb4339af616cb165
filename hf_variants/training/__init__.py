"""Training entry points: MLM pretraining (``run_mlm``) and tokenizer training (``train_tokenizer``)."""
