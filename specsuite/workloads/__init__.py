"""harness workloads package."""
