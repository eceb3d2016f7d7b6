"""workloads/correctness"""
