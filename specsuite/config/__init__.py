"""specsuite's configuration below the workload families: the `Option` class and its value parsers (option.py), the
generic options (generic_options.py) and the benchmark's size profiles (bench_profiles.py). Each family declares its
own options in its package; the assembled table is specsuite/session/option_table.py. Nothing here imports a family."""
