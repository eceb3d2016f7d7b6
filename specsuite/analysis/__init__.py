"""The A/B analysis, above the workload families: the verdicts (`verdicts.compare_arms`), the metric registry, the
estimates, `--fail-on` and the absolute rules.  It iterates specsuite.families.registry and names no family; the
building blocks the families use (engines, metrics, case series) sit below the families in specsuite.compare."""
