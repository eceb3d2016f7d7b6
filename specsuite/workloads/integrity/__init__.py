"""workloads/integrity"""
