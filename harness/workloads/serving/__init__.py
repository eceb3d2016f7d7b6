"""Serving benchmark compatible with SGLang's `bench_serving` (0.5.23 definitions).

Modules, one job each: `tokenizer` (local tokenizer wrapper), `datasets` (random, random-ids,
sharegpt request sets), `client` (asyncio streaming client per backend), `metrics`
(bench_serving's aggregate definitions plus per-chunk ITL and per-request accept length),
`runner` (warmup, flush, arrivals, concurrency cap, progress, partial save), `record`
(the JSONL line, the printed table, the pytest session's summary) and `ab` (run-level A/B:
Welch, TOST, repeats for a target effect). `--fail-on` rules come from harness.compare.fail_on.
"""
