"""Workload families: one package per kind of results (correctness cases, GSM8K, the serving benchmark, lossless,
integrity), each holding everything of its family: its workload driver, records, A/B metrics, verdict rules and
report part.

- `workload_family`: `WorkloadFamily` and what it is made of (`VerdictRule`, `FamilyRecord`, `FamilyView`);
- `registry`: the registered families in order (`register`, `families`, `metric`, `verdict_rule`);
- one package per built-in family: `correctness`, `gsm8k`, `bench`, `lossless`, `integrity`, each with its
  `family.py` (its `FAMILY` entry).

This package's `__init__` imports nothing, so a lower layer may use one family's workload modules without
loading every family.  The analysis (specsuite.analysis), the report (through the analysis,
specsuite.results.types.FamilyFacts) and specsuite.history iterate the registry; none of them names a family.
"""
