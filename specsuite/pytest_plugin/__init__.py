"""The specsuite pytest plugin: `plugin` is its entry point (the `pytest11` entry point of the same name); `core`
resolves the server and runs the sampling grid; the other modules hold each suite's options and fixtures."""
