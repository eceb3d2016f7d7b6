"""A seeded /generate workload against a reference-server arm, with the /metrics counters it moved
(shared by the arm tests and the kernel-sampler tests)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from tests.helpers.http_sessions import http_session


@dataclass
class ArmRun:
    """One workload's /generate results and the /metrics counters it moved."""

    results: list[dict]
    metric_deltas: dict[str, float]

    @property
    def output_ids(self) -> list[int]:
        return [token for result in self.results for token in result["output_ids"]]

    @property
    def spec_meta(self) -> list[dict]:
        """meta_info of the requests that ran verify steps (one that ends at prefill has none)."""
        return [r["meta_info"] for r in self.results if r["meta_info"].get("spec_verify_ct")]

    @property
    def accept_lengths(self) -> list[float]:
        return [meta["spec_accept_length"] for meta in self.spec_meta]

    @property
    def pooled_accept_length(self) -> float:
        """Tokens per verify step over all requests (SGLang's per-request formula, pooled)."""
        return sum(m["completion_tokens"] for m in self.spec_meta) / sum(m["spec_verify_ct"] for m in self.spec_meta)

    def texts(self) -> list[str]:
        return [r["text"] for r in self.results]


def read_metrics(base_url: str, timeout: Any) -> dict[str, float]:
    """/metrics as {name: value}; every series of the reference server has one label set."""
    with http_session() as session:
        response = session.get(f"{base_url}/metrics", timeout=timeout)
    response.raise_for_status()
    return {line.split("{", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in response.text.splitlines() if line and not line.startswith("#")}


def run_arm_workload(base_url: str, prompts: list[dict], temperature: float, *, max_new_tokens: int, seed_base: int,
                     concurrency: int, timeout: Any) -> ArmRun:
    """Every prompt at `temperature`, top_p 0.95, seed `seed_base + index`, `concurrency` at a time;
    results in prompt order."""
    before = read_metrics(base_url, timeout)

    def one(index: int) -> dict:
        params = {"temperature": temperature, "top_p": 0.95, "max_new_tokens": max_new_tokens, "sampling_seed": seed_base + index}
        with http_session() as session:
            response = session.post(f"{base_url}/generate", json={"text": prompts[index]["prompt"], "sampling_params": params},
                                    timeout=timeout)
        assert response.status_code == 200, response.text
        return response.json()

    with ThreadPoolExecutor(concurrency) as pool:
        results = list(pool.map(one, range(len(prompts))))
    after = read_metrics(base_url, timeout)
    return ArmRun(results, {name: after[name] - before.get(name, 0.0) for name in after})
