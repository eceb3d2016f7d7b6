"""The package list, which pyproject.toml alone cannot state: everything under specsuite/, and the checkout's
suites/ (where `pytest suites/` finds them) installed as `specsuite.suites`. The rest is in pyproject.toml."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["specsuite", "specsuite.*"]), "specsuite.suites"],
    package_dir={"specsuite.suites": "suites"},
)
