"""``attention_type="mgk"``: its spec
(``configuration_mgk``) and its implementation (``modeling_mgk``)."""
