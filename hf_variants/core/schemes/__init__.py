"""Layer schemes, one folder per ``layer_scheme`` key: ``configuration_<key>.py`` declares the idea's
config fields (its spec, torch-free) and ``modeling_<key>.py`` implements it."""
