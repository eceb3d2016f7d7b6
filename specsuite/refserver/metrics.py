"""Prometheus text exposition for /metrics (only with --enable-metrics, as in SGLang).

Names under `specsuite_refserver:` are the reference server's own ground-truth counters for the
recycled-draft_probs bug's failure chain (README, "Reference server metrics"); names under `sglang:` follow
SGLang's (`sglang/srt/observability/metrics_collector.py`).
"""

from __future__ import annotations

from specsuite.refserver.engine import Engine
from specsuite.refserver.engine_process import EngineProcess

_LABELS = 'model_name="{model}",engine_type="unified"'


def _line(name: str, kind: str, help_text: str, value: float, labels: str) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name}{{{labels}}} {float(value)}"]


def render_metrics(engine: Engine | EngineProcess, model_name: str) -> str:
    """The current counters and gauges in Prometheus text format."""
    c = engine.counters
    running, waiting = engine.queue_lengths()
    labels = _LABELS.format(model=model_name)
    lines: list[str] = []
    own = [
        ("specsuite_refserver:draft_probs_nonfinite_entries_total", "counter", "Non-finite draft_probs entries read by the verify sampler.",
         c.draft_probs_nonfinite_entries),
        ("specsuite_refserver:draft_probs_nonfinite_batches_total", "counter", "Sampler batches whose draft_probs held a non-finite entry.",
         c.draft_probs_nonfinite_batches),
        ("specsuite_refserver:draft_probs_last_batch_nonfinite", "gauge", "Non-finite draft_probs entries in the last sampler batch.",
         c.draft_probs_last_batch_nonfinite),
        ("specsuite_refserver:sampler_batches_total", "counter", "Verify batches that went through the rejection sampler.", c.sampler_batches),
        ("specsuite_refserver:sampler_fallback_emissions_total", "counter", "Tokens committed from the sampler's vocab_size-1 fallback.",
         c.sampler_fallback_emissions),
        ("specsuite_refserver:sampler_guard_replacements_total", "counter", "Out-of-range ids replaced by the fix's output guard.",
         c.sampler_guard_replacements),
        ("specsuite_refserver:spec_drafted_tokens_total", "counter", "Draft tokens proposed.", c.drafted_tokens),
        ("specsuite_refserver:spec_accepted_tokens_total", "counter", "Draft tokens accepted (bonus tokens excluded).", c.accepted_drafts),
        ("specsuite_refserver:emulated_steps_total", "counter", "Decode steps run on the --step-time-ms clock.", c.emulated_steps),
        ("specsuite_refserver:emulated_steps_late_total", "counter", "Emulated steps whose results were computed after their deadline.", c.emulated_steps_late),
        ("specsuite_refserver:emulated_late_seconds_total", "counter", "How far the emulated clock slipped behind --step-time-ms.", c.emulated_late_seconds),
    ]
    sglang = [
        ("sglang:spec_verify_calls_total", "counter", "Request-verify steps.", c.verify_calls),
        ("sglang:generation_tokens_total", "counter", "Generated tokens.", c.generation_tokens),
        ("sglang:prompt_tokens_total", "counter", "Prompt tokens.", c.prompt_tokens),
        ("sglang:num_requests_total", "counter", "Finished requests.", c.requests_finished),
        ("sglang:num_aborted_requests_total", "counter", "Aborted requests.", c.requests_aborted),
        ("sglang:num_running_reqs", "gauge", "Running requests.", running),
        ("sglang:num_queue_reqs", "gauge", "Waiting requests.", waiting),
        ("sglang:spec_num_steps", "gauge", "Draft steps.", engine.config.num_steps if engine.config.speculative else 0),
        ("sglang:spec_num_draft_tokens", "gauge", "Draft tokens per verify.", engine.config.num_draft_tokens if engine.config.speculative else 0),
    ]
    if c.last_interval_accept_length is not None:
        sglang.append(("sglang:spec_accept_length", "gauge", "Accept length over the last log interval.", c.last_interval_accept_length))
        sglang.append(("sglang:spec_accept_rate", "gauge", "Accept rate over the last log interval.", c.last_interval_accept_rate or 0.0))
    for name, kind, help_text, value in own + sglang:
        lines += _line(name, kind, help_text, value, labels)
    return "\n".join(lines) + "\n"
