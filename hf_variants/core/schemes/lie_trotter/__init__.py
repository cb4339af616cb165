"""``layer_scheme="lie_trotter"``: its spec
(``configuration_lie_trotter``) and its implementation (``modeling_lie_trotter``)."""
