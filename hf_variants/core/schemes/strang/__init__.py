"""``layer_scheme="strang"``: its spec
(``configuration_strang``) and its implementation (``modeling_strang``)."""
