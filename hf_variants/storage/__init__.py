"""What the package writes to disk, below both the engines and the Hub export: checked writes that stay
inside their folder (:mod:`.files`), records parsed against their schema (:mod:`.record_schema`), a run's
identity (:mod:`.run_identity`) and the run folder's lock, fingerprint and manifest (:mod:`.run_folder`)."""
