"""``layer_scheme="vanilla"``: its spec
(``configuration_vanilla``) and its implementation (``modeling_vanilla``)."""
