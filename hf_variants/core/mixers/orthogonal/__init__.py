"""``attention_type="orthogonal"``: its spec
(``configuration_orthogonal``) and its implementation (``modeling_orthogonal``)."""
