"""The stub family's workload: sampled answers at temperature 1 on the session's server, counting those that hold the
sampler's fallback id; the tally goes into the session's workloads (results.json's `workloads.stub`)."""

from __future__ import annotations

from specsuite.families.workload_driver import WorkloadDriver
from specsuite.server.protocol import GenerationRequest, Sampling
from tests.helpers.stub_family.records import RESULTS_KEY, FallbackTally

PROMPTS = ("Once upon a time", "Lily and Ben were", "The little dog", "One day, a bird")


class FallbackTallyDriver(WorkloadDriver):
    def run(self) -> FallbackTally:
        server, settings = self.session.server, self.session.config.stub
        requests = [GenerationRequest(prompt=PROMPTS[k % len(PROMPTS)],
                                      sampling=Sampling(temperature=1.0, top_p=1.0, max_new_tokens=24, seed=self.session.config.seed + k))
                    for k in range(settings.answers)]
        with self.session.watch("stub"):
            answers = server.client.generate_requests(requests)
        fallback = server.vocab.fallback_id
        tally = FallbackTally(answers=len(answers),
                              with_fallback=sum(fallback in (answer.generation.output_ids or []) for answer in answers))
        self.session.workloads[RESULTS_KEY] = tally.to_dict()
        self.session.write_results("running")
        return tally
