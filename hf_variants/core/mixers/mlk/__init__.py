"""``attention_type="mlk"``: its spec
(``configuration_mlk``) and its implementation (``modeling_mlk``)."""
