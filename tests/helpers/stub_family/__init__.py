"""A stub workload family in one folder, to show what adding a family takes: its options and settings (`options.py`),
its workload driver (`driver.py`), its records (`records.py`), and its entry (`family.py`: a metric and its verdict
rule, an arm's figures for the verdict line, a report section and a nightly rule).  Registered by one line
(`specsuite.families.registry.register(FAMILY)`); no file of the generic layers names it
(tests/families/test_stub_family.py)."""
