"""Helpers for the project's own tests (stand-in processes and servers)."""
