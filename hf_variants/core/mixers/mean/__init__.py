"""``attention_type="mean"``: its spec (``configuration_mean``) and its implementation (``modeling_mean``)."""
