"""Workload families: each kind of results (correctness cases, GSM8K, the serving benchmark, lossless, integrity),
registered once with its records, A/B metrics, verdict rules, report part and history metrics.

- `family`: `WorkloadFamily` and what it is made of (`VerdictRule`, `FamilyRecord`, `FamilyView`);
- `registry`: the registered families in order (`register`, `families`, `metric`, `verdict_rule`);
- one module per built-in family: `correctness`, `gsm8k`, `bench`, `lossless`, `integrity`.

specsuite.compare (the A/B analysis), the report (through the analysis, specsuite.results.types.FamilyFacts)
and specsuite.history iterate the registry; none of them names a family.
"""

from specsuite.families.family import FamilyRecord, FamilyView, VerdictRule, WorkloadFamily
from specsuite.families.registry import families, family, metric, register, registered_metrics, unregister, verdict_rule

__all__ = ["FamilyRecord", "FamilyView", "VerdictRule", "WorkloadFamily", "families", "family", "metric", "register",
           "registered_metrics", "unregister", "verdict_rule"]
