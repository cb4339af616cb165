"""``layer_scheme="ode"``: its spec
(``configuration_ode``) and its implementation (``modeling_ode``)."""
