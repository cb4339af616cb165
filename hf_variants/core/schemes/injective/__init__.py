"""``layer_scheme="injective"``: its spec
(``configuration_injective``) and its implementation (``modeling_injective``)."""
