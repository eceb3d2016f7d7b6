"""Nightly history: a results database of runs and metrics, trends, step detection and baselines.

Modules, each with one job:

- `backends`: SQLite (default, WAL) and PostgreSQL (psycopg) connections behind one interface;
- `schema`: the versioned schema as numbered migrations for both databases;
- `runs`: the stored run and the configuration fingerprint that decides comparability;
- `metrics`: which metrics are kept per run and case, their versions and directions;
- `ingest`: a results.json into runs and metrics;
- `store`: `HistoryStore`, reading and writing runs and metrics;
- `steps`: step detection (binary segmentation with a t-test);
- `analysis`: series, trends, steps and the regression list;
- `baseline`: `--compare-to last-good|RUN_ID` and tonight's comparison against it.
"""

from specsuite.history.analysis import analyse
from specsuite.history.baseline import HistoryBaseline, NightlyComparison, compare_case, parse_compare_to, resolve_baseline
from specsuite.history.ingest import IngestItem, items_from_file, items_from_results
from specsuite.history.metrics import METRIC_VERSIONS, MetricRecord
from specsuite.history.runs import RunRecord, config_from_identity, config_key
from specsuite.history.steps import ChangePoint, detect_steps
from specsuite.history.store import HistoryStore, StoredRun

__all__ = [
    "METRIC_VERSIONS",
    "ChangePoint",
    "HistoryBaseline",
    "HistoryStore",
    "IngestItem",
    "MetricRecord",
    "NightlyComparison",
    "RunRecord",
    "StoredRun",
    "analyse",
    "compare_case",
    "config_from_identity",
    "config_key",
    "detect_steps",
    "items_from_file",
    "items_from_results",
    "parse_compare_to",
    "resolve_baseline",
]
