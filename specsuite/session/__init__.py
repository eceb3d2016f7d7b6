"""One run of specsuite, whatever the front end: the typed run configuration (config.py) and the session that holds
the server, the run folder, its writers and the fault guard (run_session.py). Nothing here knows pytest: the pytest
plugin (specsuite/pytest_plugin/core.py) and the CLI verbs (specsuite/cli/) are thin adapters that build a RunConfig from their
options and drive a RunSession."""
