"""Serving benchmark compatible with SGLang's `bench_serving` (0.5.23 definitions).

Modules, one job each: `datasets` (random, random-ids, sharegpt request sets; the tokenizer is
specsuite.server.tokenizer's), `client` (asyncio streaming client per backend), `metrics`
(bench_serving's aggregate definitions plus per-chunk ITL and per-request accept length),
`runner` (warmup, flush, arrivals, concurrency cap, progress, partial save) and `record` (the
JSONL line, the printed table, the pytest session's summary). The run-level A/B of benchmark
runs and the `--fail-on` rules live in specsuite.analysis.
"""
