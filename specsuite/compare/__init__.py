"""The comparison building blocks the workload families use, below them: the engines that fill a comparison row
(`engines`), a metric's definition (`metric`) and a family's records per case and repeat (`series`).  The analysis
that iterates the families sits above them, in specsuite.analysis."""
