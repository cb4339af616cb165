"""``attention_type="softmax"``: its spec
(``configuration_softmax``) and its implementation (``modeling_softmax``)."""
