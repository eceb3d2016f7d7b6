"""Probe every sampling parameter on a speculation-on server against the same model served without speculation.

The same requests go to a candidate URL (speculation on) and a reference URL (speculation off). Each case sets one
sampling parameter; every prompt also gets an unparameterised run on both servers. Per case and prompt the outcome is:

- ``identical``: the candidate's ids equal the reference's;
- ``ignored``: the candidate's ids equal its own unparameterised ids while the reference's changed;
- ``differ``: any other difference (the parameter acts on the candidate, but not as on the reference);
- ``refused``: the candidate answered 4xx (its message is printed).

Cases at temperature 0 must be token-identical on a correct server (up to near ties; the project's tiny Llama in
float32 on these two servers has none in 48 tokens). ``n>1`` and ``seed`` cases at temperature 1 report a property
instead (distinct samples; seed reproduced inside a concurrent batch); logprob cases report the largest absolute
difference between the two servers' logprobs for the same ids. Every request carries a fixed seed (printed).

Start the servers (one pair at a time on a small machine; stop both by PID afterwards), then run the probe:

    # SGLang (native /generate), release 0.5.23 or 0.5.20, the project's tiny Llama on the CPU ops
    SPECSUITE_SGLANG_DIR=$PWD/.sglang specsuite serve-sglang --sglang-version 0.5.23 --method eagle --port 30421 &
    SPECSUITE_SGLANG_DIR=$PWD/.sglang specsuite serve-sglang --sglang-version 0.5.23 --method none --port 30422 &
    python tools/calibration/sampling_parity_probe.py --api sglang http://127.0.0.1:30421 http://127.0.0.1:30422

    # vLLM 0.32 (OpenAI /v1/completions with return_token_ids), EAGLE against speculation off; --patch expand_fix
    # keeps the CPU expand bug (docs/findings/vllm-spec-padded-ids.md) out of the T > 0 rows
    export SPECSUITE_VLLM_PYTHON=$PWD/.venv-vllm/bin/python
    specsuite serve-vllm --method eagle --patch expand_fix --port 30431 &
    specsuite serve-vllm --method none --port 30432 &
    python tools/calibration/sampling_parity_probe.py --api openai http://127.0.0.1:30431 http://127.0.0.1:30432

On vLLM 0.32 CPU the case ``top_k=1 at T=1`` kills the speculative engine (docs/findings/vllm-cpu-spec-top-k-kills-engine.md):
the probe stops there with the 500; run the other cases with ``--only``.

Options: ``--prompts N`` (default 8), ``--max-new-tokens`` (48), ``--only NAME,...`` (cases whose names start so),
``--json PATH`` (every answer, for a write-up). Two SGLang-only modes replace the table: ``--relaxed-replay
frequency_penalty=1.0`` replays the candidate's verify blocks under the one-token-per-step penalty on the reference
(docs/findings/sglang-eagle-relaxed-penalties.md); ``--penalty-timing 0.5`` tests whether the reference's own
penalty runs one token late (docs/findings/sglang-overlap-penalties-one-token-late.md). Needs only the standard
library and ``requests``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import requests

PROMPTS = ("Once upon a time", "Lily and Ben were", "One day, a little girl named", "The big dog", "Tom had a red ball",
           "The sun was shining and", "Mom said to", "In the park, there was")
SEED = 1234  # every request's seed; T=0 cases do not depend on it
TIMEOUT_S = 300.0
LOGPROB_TOLERANCE = 1e-3  # float32 on both servers; the two run different kernels (verify batch vs decode)


class ProbeError(Exception):
    """One line for the user: which server, which request, what went wrong."""


@dataclass
class Answer:
    ids: list[int] = field(default_factory=list)
    text: str = ""
    finish: str = ""
    status: int = 200
    error: str = ""
    output_logprobs: list[float] = field(default_factory=list)
    prompt_logprobs: list[float] = field(default_factory=list)
    samples: list[list[int]] = field(default_factory=list)  # n > 1


class Client:
    """One server, one API: SGLang's native /generate or the OpenAI completions route (vLLM)."""

    def __init__(self, url: str, api: str):
        self.url, self.api = url.rstrip("/"), api
        try:
            requests.get(f"{self.url}/health", timeout=10).raise_for_status()
        except requests.RequestException as exc:
            raise ProbeError(f"{self.url}: /health did not answer 200 ({type(exc).__name__}: {exc})") from None

    def generate(self, prompt: str, params: dict[str, Any]) -> Answer:
        if self.api == "sglang":
            return self._sglang(prompt, params)
        return self._openai(prompt, params)

    def _post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        try:
            reply = requests.post(f"{self.url}{path}", json=body, timeout=TIMEOUT_S)
        except requests.RequestException as exc:
            raise ProbeError(f"{self.url}{path}: no answer ({type(exc).__name__}: {exc})") from None
        if 400 <= reply.status_code < 500:
            return reply.status_code, reply.text.strip().replace("\n", " ")[:300]
        if reply.status_code != 200:  # a 5xx usually means the engine died: stop, naming the request
            raise ProbeError(f"{self.url}{path}: HTTP {reply.status_code} for {json.dumps(body)[:300]}: "
                             f"{reply.text.strip()[:200]}")
        return 200, reply.json()

    def _sglang(self, prompt: str, params: dict[str, Any]) -> Answer:
        sampling = {k: v for k, v in params.items() if k not in ("logprobs", "prompt_logprobs", "seed")}
        if "seed" in params:
            sampling["sampling_seed"] = params["seed"]
        body: dict[str, Any] = {"text": prompt, "sampling_params": sampling}
        if params.get("logprobs") or params.get("prompt_logprobs"):
            body.update(return_logprob=True, logprob_start_len=0 if params.get("prompt_logprobs") else -1)
        status, data = self._post("/generate", body)
        if status != 200:
            return Answer(status=status, error=data)
        items = data if isinstance(data, list) else [data]
        first = items[0]
        meta = first.get("meta_info", {})
        finish = meta.get("finish_reason") or {}
        answer = Answer(ids=list(first.get("output_ids", [])), text=first.get("text", ""),
                        finish=json.dumps(finish, sort_keys=True), samples=[list(i.get("output_ids", [])) for i in items])
        answer.output_logprobs = [e[0] for e in meta.get("output_token_logprobs") or []]
        answer.prompt_logprobs = [e[0] for e in (meta.get("input_token_logprobs") or [])[1:]]
        return answer

    def _openai(self, prompt: str, params: dict[str, Any]) -> Answer:
        rename = {"max_new_tokens": "max_tokens", "min_new_tokens": "min_tokens"}
        body: dict[str, Any] = {"model": self._model(), "prompt": prompt, "return_token_ids": True}
        for key, value in params.items():
            body[rename.get(key, key)] = value
        if params.get("logprobs"):
            body["logprobs"] = 1
        if params.get("prompt_logprobs"):
            body["prompt_logprobs"] = 1
        status, data = self._post("/v1/completions", body)
        if status != 200:
            return Answer(status=status, error=data)
        choices = sorted(data["choices"], key=lambda c: c.get("index", 0))
        first = choices[0]
        answer = Answer(ids=list(first.get("token_ids") or []), text=first.get("text", ""),
                        finish=str(first.get("finish_reason")), samples=[list(c.get("token_ids") or []) for c in choices])
        answer.output_logprobs = list((first.get("logprobs") or {}).get("token_logprobs") or [])
        prompt_entries = first.get("prompt_logprobs") or []
        prompt_ids = first.get("prompt_token_ids") or []
        answer.prompt_logprobs = [entry[str(tok)]["logprob"] for tok, entry in zip(prompt_ids, prompt_entries, strict=False) if entry]
        return answer

    def _model(self) -> str:
        if not hasattr(self, "_model_name"):
            try:
                models = requests.get(f"{self.url}/v1/models", timeout=10).json()["data"]
            except (requests.RequestException, KeyError, ValueError) as exc:
                raise ProbeError(f"{self.url}/v1/models: no model list ({type(exc).__name__}: {exc})") from None
            self._model_name = models[0]["id"]
        return self._model_name


def greedy(max_new_tokens: int, **extra: Any) -> dict[str, Any]:
    return {"temperature": 0.0, "max_new_tokens": max_new_tokens, **extra}


def most_frequent_token(ids: list[int]) -> int:
    return Counter(ids).most_common(1)[0][0]


def build_cases(base: dict[str, Answer], max_new: int) -> dict[str, dict[str, dict[str, Any]]]:
    """Case name -> prompt -> request parameters; some are placed from the reference's unparameterised answer."""
    cases: dict[str, dict[str, dict[str, Any]]] = {}

    def every(name: str, params: dict[str, Any]) -> None:
        cases[name] = {p: dict(params) for p in base}

    for strength in (0.5, 1.0, 2.0):
        every(f"frequency_penalty={strength}", greedy(max_new, frequency_penalty=strength))
    every("presence_penalty=1.5", greedy(max_new, presence_penalty=1.5))
    every("repetition_penalty=1.3", greedy(max_new, repetition_penalty=1.3))
    # min_new_tokens 3 below where the reference stops on its own: it must change nothing (EOS is allowed from then on);
    # a server that counts verify steps instead of tokens keeps EOS masked and runs on.
    cases["min_new_tokens"] = {p: greedy(max_new, min_new_tokens=len(a.ids) - 3) for p, a in base.items()
                               if "stop" in a.finish and len(a.ids) >= 8}
    every("min_p=0.3 (T=0)", greedy(max_new, min_p=0.3))
    # at T=1 outputs are random: these two rows only show a refusal (4xx) or a crash, not parity
    every("min_p=0.3 at T=1 (refusal)", {"temperature": 1.0, "min_p": 0.3, "max_new_tokens": max_new, "seed": SEED})
    every("logit_bias at T=1 (refusal)", {"temperature": 1.0, "logit_bias": {"5": -100.0}, "max_new_tokens": max_new,
                                          "seed": SEED})
    every("top_k=1 at T=1", {"temperature": 1.0, "top_k": 1, "max_new_tokens": max_new, "seed": SEED})
    every("top_k=5,top_p=0.5 at T=1e-5", {"temperature": 1e-5, "top_k": 5, "top_p": 0.5, "max_new_tokens": max_new, "seed": SEED})
    # logit_bias: ban the reference's most frequent output token; force token id 5 (its output is then all 5s)
    cases["logit_bias ban"] = {p: greedy(max_new, logit_bias={str(most_frequent_token(a.ids)): -100.0}) for p, a in base.items()}
    every("logit_bias force", greedy(max_new, logit_bias={"5": 100.0}))
    # a stop id / stop string the reference reaches at output position 9 (inside the third or fourth verify block)
    cases["stop_token_ids"] = {p: greedy(max_new, stop_token_ids=[a.ids[9]]) for p, a in base.items() if len(a.ids) > 9}
    cases["stop string"] = {p: greedy(max_new, stop=[a.text[len(a.text) // 3:len(a.text) // 3 + 3]])
                            for p, a in base.items() if len(a.text) > 12}
    for budget in (5, 6, 7, 8):  # 4 draft tokens: one verify commits 1 to 4 tokens, so 5..8 cross a block boundary
        every(f"max_new_tokens={budget}", greedy(budget))
    every("n=2 (T=0)", greedy(max_new, n=2))
    every("n=4 (T=1)", {"temperature": 1.0, "max_new_tokens": max_new, "n": 4, "seed": SEED})
    every("output logprobs (T=0)", greedy(max_new, logprobs=True))
    every("prompt logprobs (T=0)", greedy(max_new, prompt_logprobs=True))
    return cases


def verdict(name: str, cand: Answer, ref: Answer, cand_base: Answer, ref_base: Answer) -> tuple[str, str]:
    """(outcome, detail): outcome is identical / ignored / differ / refused, or a property for n>1 at T=1."""
    if cand.status != 200:
        return "refused", f"{cand.status}: {cand.error[:200]}"
    if ref.status != 200:
        return "reference refused", f"{ref.status}: {ref.error[:200]}"
    if name.startswith("n=4"):
        distinct = len({tuple(s) for s in cand.samples}), len({tuple(s) for s in ref.samples})
        outcome = "candidate samples all distinct" if distinct[0] == len(cand.samples) else "candidate repeats a sample"
        return outcome, f"distinct: candidate {distinct[0]}/{len(cand.samples)}, reference {distinct[1]}/{len(ref.samples)}"
    if cand.ids != ref.ids:
        ignored = cand.ids == cand_base.ids and ref.ids != ref_base.ids
        first = next((i for i, (a, b) in enumerate(zip(cand.ids, ref.ids, strict=False)) if a != b), min(len(cand.ids), len(ref.ids)))
        return ("ignored" if ignored else "differ"), f"first difference at output token {first} " \
            f"(lengths {len(cand.ids)} vs {len(ref.ids)})"
    if name.startswith(("output logprobs", "prompt logprobs")):
        pairs = list(zip(cand.output_logprobs, ref.output_logprobs, strict=False)) if name.startswith("output") else \
            list(zip(cand.prompt_logprobs, ref.prompt_logprobs, strict=False))
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        if not pairs:
            return "no logprobs returned", ""
        delta = max(abs(a - b) for a, b in pairs)
        return ("identical" if delta <= LOGPROB_TOLERANCE else "wrong logprobs"), f"max |dlogprob| {delta:.1e}"
    if cand.finish != ref.finish:
        return "finish differs", f"{cand.finish} vs {ref.finish}"
    return "identical", ""


def seed_case(cand: Client, ref: Client, prompt: str, max_new: int) -> str:
    """A seed inside a concurrent batch: seeds 7, 8, 7 at once; the two seed-7 answers must match the solo one."""
    params = {"temperature": 1.0, "max_new_tokens": max_new}
    lines = []
    for label, client in (("candidate", cand), ("reference", ref)):
        solo = client.generate(prompt, {**params, "seed": 7})
        if solo.status != 200:
            lines.append(f"{label} refused ({solo.status}: {solo.error[:120]})")
            continue
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            batch = list(pool.map(lambda s, c=client: c.generate(prompt, {**params, "seed": s}), (7, 8, 7)))
        same = batch[0].ids == batch[2].ids == solo.ids
        lines.append(f"{label}: seed 7 {'reproduced' if same else 'NOT reproduced'} in a batch, "
                     f"seed 8 {'differs' if batch[1].ids != solo.ids else 'same as seed 7'}")
    return "; ".join(lines)


def relaxed_replay(cand: Client, ref: Client, prompt: str, kind: str, strength: float, max_new: int) -> str:
    """Replay the candidate's penalised greedy answer block by block on the reference (SGLang API only).

    The candidate streams its answer; each stream chunk after the first is one verify step's accepted block. Before
    each step SGLang's EAGLE path feeds the penalizers only the request's last output token. The replay gives the
    reference, for every block, the prefix so far and a logit_bias equal to the additive penalty built from those
    last tokens alone (frequency: -strength x count; presence: -strength once seen) and asks for the block's length
    greedily. If every block comes back unchanged, the candidate's output is exactly that relaxed penalty.
    """
    sampling = greedy(max_new, **{kind: strength})
    try:
        reply = requests.post(f"{cand.url}/generate", json={"text": prompt, "stream": True, "sampling_params": sampling},
                              timeout=TIMEOUT_S, stream=True)
        chunks = [json.loads(line[6:]) for line in reply.iter_lines(decode_unicode=True)
                  if line and line.startswith("data: {")]
    except (requests.RequestException, ValueError) as exc:
        raise ProbeError(f"{cand.url}/generate (stream): {type(exc).__name__}: {exc}") from None
    ends = [len(c["output_ids"]) for c in chunks]
    ids = chunks[-1]["output_ids"]
    prompt_ids = prompt_ids_of(ref, prompt)
    counted: Counter[int] = Counter()
    reproduced = 0
    for start, end in zip(ends, ends[1:], strict=False):
        counted[ids[start - 1]] += 1  # the last output token before this step, the only one the penalizers see
        penalty = strength if kind == "presence_penalty" else None
        bias = {str(t): -(penalty if penalty is not None else strength * c) for t, c in counted.items()}
        status, out = ref._post("/generate", {"input_ids": prompt_ids + ids[:start],
                                              "sampling_params": greedy(end - start, logit_bias=bias)})
        if status != 200:
            raise ProbeError(f"{ref.url}: replay refused ({out})")
        reproduced += out["output_ids"][:end - start] == ids[start:end]
    # The same tokens under the exact penalty (every output token so far counted), one position at a time.
    exact_mismatch = []
    for i in range(1, len(ids)):
        seen = Counter(ids[:i])
        bias = {str(t): -(strength if kind == "presence_penalty" else strength * c) for t, c in seen.items()}
        status, out = ref._post("/generate", {"input_ids": prompt_ids + ids[:i], "sampling_params": greedy(1, logit_bias=bias)})
        if status != 200:
            raise ProbeError(f"{ref.url}: replay refused ({out})")
        if out["output_ids"][:1] != ids[i:i + 1]:
            exact_mismatch.append(i)
    blocks = len(ends) - 1
    return (f"{kind}={strength} on {prompt!r}: {len(ids)} tokens in {blocks} verify blocks (sizes "
            f"{[b - a for a, b in zip(ends, ends[1:], strict=False)]}); penalised tokens {sorted(counted)} (one per step); "
            f"replayed with the relaxed penalty on the reference: {reproduced}/{blocks} blocks reproduced; "
            f"with the exact penalty, the candidate's token is not the penalised argmax at output positions "
            f"{exact_mismatch or 'none'}")


def prompt_ids_of(client: Client, prompt: str) -> list[int]:
    """The prompt's token ids as the server tokenises it (SGLang API)."""
    status, scored = client._post("/generate", {"text": prompt, "return_logprob": True, "logprob_start_len": 0,
                                                "sampling_params": greedy(1)})
    if status != 200:
        raise ProbeError(f"{client.url}: could not read the prompt's ids ({scored})")
    return [entry[1] for entry in scored["meta_info"]["input_token_logprobs"]]


def penalty_timing(client: Client, prompt: str, strength: float, max_new: int) -> str:
    """Which frequency-penalty state reproduces a server's own penalised greedy answer, position by position:
    every earlier output token counted (exact), or one token late with the prompt's last token counted first
    (what SGLang's overlap schedule feeds the penalizers). SGLang API."""
    status, answer = client._post("/generate", {"text": prompt, "sampling_params": greedy(max_new, frequency_penalty=strength)})
    if status != 200:
        raise ProbeError(f"{client.url}: penalised request refused ({answer})")
    ids, prompt_ids = answer["output_ids"], prompt_ids_of(client, prompt)
    missed: dict[str, list[int]] = {"exact": [], "one token late": []}
    for k in range(1, len(ids)):
        for name, seen in (("exact", ids[:k]), ("one token late", [prompt_ids[-1], *ids[:k - 1]])):
            bias = {str(t): -strength * c for t, c in Counter(seen).items()}
            status, out = client._post("/generate", {"input_ids": prompt_ids + ids[:k],
                                                     "sampling_params": greedy(1, logit_bias=bias)})
            if status != 200:
                raise ProbeError(f"{client.url}: replay refused ({out})")
            if out["output_ids"][:1] != ids[k:k + 1]:
                missed[name].append(k)
    return (f"frequency_penalty={strength} on {prompt!r}: {len(ids)} tokens; positions not reproduced: "
            + "; ".join(f"{name} counts {where or 'none'}" for name, where in missed.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("candidate", help="speculation-on server URL")
    parser.add_argument("reference", help="speculation-off server URL, same model")
    parser.add_argument("--api", choices=("sglang", "openai"), required=True)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--only", default="", help="comma-separated case names (prefixes) to run")
    parser.add_argument("--json", default="", help="write every answer here")
    parser.add_argument("--relaxed-replay", default="", metavar="KIND=STRENGTH",
                        help="SGLang only: replay the candidate's blocks under the one-token-per-step penalty "
                             "(frequency_penalty=1.0 or presence_penalty=1.5) instead of the table")
    parser.add_argument("--penalty-timing", type=float, default=None, metavar="STRENGTH",
                        help="SGLang only: on the REFERENCE, test whether its frequency penalty counts every earlier "
                             "token or runs one token late (the overlap schedule) instead of the table")
    args = parser.parse_args(argv)
    if not 1 <= args.prompts <= len(PROMPTS):
        print(f"sampling_parity_probe: --prompts must be 1..{len(PROMPTS)}", file=sys.stderr)
        return 2
    try:
        return run(args)
    except ProbeError as exc:
        print(f"sampling_parity_probe: {exc}", file=sys.stderr)
        return 1


def run(args: argparse.Namespace) -> int:
    cand, ref = Client(args.candidate, args.api), Client(args.reference, args.api)
    prompts = PROMPTS[:args.prompts]
    if args.penalty_timing is not None:
        if args.api != "sglang":
            raise ProbeError("--penalty-timing needs --api sglang")
        for prompt in prompts:
            print(penalty_timing(ref, prompt, args.penalty_timing, args.max_new_tokens))
        return 0
    if args.relaxed_replay:
        kind, _, value = args.relaxed_replay.partition("=")
        if args.api != "sglang" or kind not in ("frequency_penalty", "presence_penalty"):
            raise ProbeError("--relaxed-replay takes frequency_penalty=X or presence_penalty=X, with --api sglang")
        for prompt in prompts:
            print(relaxed_replay(cand, ref, prompt, kind, float(value), args.max_new_tokens))
        return 0
    base_params = greedy(args.max_new_tokens)
    cand_base = {p: cand.generate(p, base_params) for p in prompts}
    ref_base = {p: ref.generate(p, base_params) for p in prompts}
    for p in prompts:
        if cand_base[p].status != 200 or ref_base[p].status != 200:
            raise ProbeError(f"the unparameterised greedy request was refused for {p!r}")
    print(f"seed {SEED}; {len(prompts)} prompts; max_new_tokens {args.max_new_tokens}; api {args.api}")
    print(f"{'unparameterised (T=0)':32s} identical {sum(cand_base[p].ids == ref_base[p].ids for p in prompts)}/{len(prompts)}")
    only = [o.strip() for o in args.only.split(",") if o.strip()]
    record: dict[str, Any] = {"seed": SEED, "base": {p: [cand_base[p].ids, ref_base[p].ids] for p in prompts}, "cases": {}}
    for name, per_prompt in build_cases(ref_base, args.max_new_tokens).items():
        if only and not any(name.startswith(o) for o in only):
            continue
        rows = {}
        for prompt, params in per_prompt.items():
            c, r = cand.generate(prompt, params), ref.generate(prompt, params)
            rows[prompt] = verdict(name, c, r, cand_base[prompt], ref_base[prompt])
            record["cases"].setdefault(name, {})[prompt] = {"params": params, "candidate": c.ids, "reference": r.ids,
                                                             "outcome": rows[prompt][0], "detail": rows[prompt][1],
                                                             "candidate_finish": c.finish, "reference_finish": r.finish}
        tally = Counter(outcome for outcome, _ in rows.values())
        details = [detail for _, detail in rows.values() if detail]
        if "logprobs" in name:  # the worst difference, not the first
            details.sort(key=lambda d: float(d.rsplit(" ", 1)[-1]), reverse=True)
        print(f"{name:32s} " + ", ".join(f"{k} {n}" for k, n in tally.most_common()) +
              (f"  [e.g. {details[0]}]" if details else ""))
    if not only or any("seed".startswith(o) or o.startswith("seed") for o in only):
        print(f"{'seed in a batch (T=1)':32s} {seed_case(cand, ref, prompts[0], args.max_new_tokens)}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(record, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
