"""specsuite's configuration: the option table (options.py), the one declaration of every pytest and `specsuite` option,
imported by the CLI, the pytest plugins and conftest.py alike."""
