"""SGLang behind the engine seam: its server flags, endpoints, metric names and
what its versions have. The facts were read from SGLang 0.5.17's source (the PyPI
wheel sglang-0.5.17-cp312-cp312-manylinux_2_34_x86_64.whl; docs/sglang.md names the
file of each) and checked against a real server on an H100 through the main command
(its replies are tests/data/h100_sglang0517_*). SGLang has no CPU build: CI runs this
module against a stand-in that replays those replies (tests/node/fake_sglang.py).
"""
from __future__ import annotations

import json
import os
import re
import shlex
import tempfile
from pathlib import Path
from typing import Mapping, Optional, Sequence

from launcher.engines.base import Engine
from launcher.engines.types import (AcceptanceSource, Capabilities, EngineError, MetricNames, RecipeFacts,
                                    ServerKey, ServingOptions, UserServerArgs)
from launcher.engines.versions import parse_version
from launcher.engines.flags import drop_flags, parse_human_int
import launcher.engines.forced_acceptance as fa

# The speculative algorithms of --speculative-algorithm (srt/server_args.py) for our draft methods.
ALGORITHMS = {"eagle3": "EAGLE3", "eagle": "EAGLE", "mtp": "EAGLE", "draft_model": "STANDALONE", "ngram": "NGRAM"}

ALGORITHM_FLAG = "--speculative-algorithm"
DRAFT_PATH_FLAG = "--speculative-draft-model-path"
NUM_STEPS_FLAG = "--speculative-num-steps"
TOPK_FLAG = "--speculative-eagle-topk"
NUM_DRAFT_TOKENS_FLAG = "--speculative-num-draft-tokens"
REJECTION_SAMPLING_FLAG = "--speculative-use-rejection-sampling"
METRICS_FLAG = "--enable-metrics"
API_KEY_FLAG = "--api-key"
CONFIG_FLAG = "--config"  # a YAML of server arguments (keys as the flags without "--")
MEMORY_FLAGS = ("--mem-fraction-static", "--max-total-tokens")

# Keys of our speculative config that are vLLM's own (--speculative-config JSON): SGLang has
# no counterpart flag, so a recipe carrying them is refused rather than silently dropped.
VLLM_ONLY_KEYS = ("prompt_lookup_min", "prompt_lookup_max", "draft_sample_method", "synthetic_acceptance_rates",
                  "draft_tensor_parallel_size")
# Keys of our speculative config that speculative_flags turns into flags itself, or (the forced
# acceptance: launcher.engines.forced_acceptance's keys) into the server's environment.
OWN_KEYS = ("method", "model", "num_speculative_tokens", "eagle_topk", "num_draft_tokens",
            "use_rejection_sampling", fa.METHOD_KEY, fa.LENGTH_KEY)

# The one version whose source was read. Others are unknown (assumed alike, marked unknown).
READ_VERSION = (0, 5, 17)
SIMULATE_ACC_ENV = "SGLANG_SIMULATE_ACC_LEN"
# Its token mode: "fixed" (SGLang's default) emits token id 100 for every token, which the tiny and
# many real tokenizers decode to an incomplete UTF-8 character, so the server holds the stream's
# text until the reply ends (one chunk of 63 tokens: docs/sglang.md); "real-draft-token" emits the
# draft's own tokens, and the stream keeps one chunk per verify step.
SIMULATE_TOKEN_MODE_ENV = "SGLANG_SIMULATE_ACC_TOKEN_MODE"
SIMULATE_TOKEN_MODE = "real-draft-token"
SIMULATE_METHOD_ENV = "SGLANG_SIMULATE_ACC_METHOD"
# Gauges (batch means of the last logged step, not counters: never differenced).
ACCEPT_LENGTH_GAUGE = "sglang:spec_accept_length"
ACCEPT_RATE_GAUGE = "sglang:spec_accept_rate"
OVERLAP_OFF_FLAG = "--disable-overlap-schedule"
_SERVER_ARGS_OVERLAP = re.compile(r"server_args=ServerArgs\(.*?\bdisable_overlap_schedule=(True|False)")


def chosen_settings(log_text: str) -> dict[str, str]:
    """The overlap scheduling SGLang chose, from the ServerArgs line its start-up log prints
    (``disable_overlap_schedule=False``: the scheduler prepares step n+1 while the GPU runs
    step n; 0.5.17 runs speculative decoding through that overlapped worker unless
    --disable-overlap-schedule). The last line wins (a restart appends to the log)."""
    found = _SERVER_ARGS_OVERLAP.findall(log_text or "")
    return {"overlap_schedule": "off" if found[-1] == "True" else "on"} if found else {}


def inferred_chosen_settings(method, version, argv) -> dict[str, str]:
    """0.5.17's rule where no log was read: overlap scheduling on unless the argv turns it off."""
    if OVERLAP_OFF_FLAG in list(argv or ()):
        return {}
    return {"overlap_schedule": "on"} if parse_version(version) == READ_VERSION else {}


class SGLang(Engine):
    name = "sglang"
    result_name = "SGLANG"  # as specdec_bench names its engines (VLLM, SGLANG, TRTLLM)
    default_command = "python3 -m sglang.launch_server"
    default_image = "lmsysorg/sglang:v0.5.17"
    # /health: 503 while the server is starting; when idle it generates one token (as /health_generate
    # does) unless SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=0 (default on in 0.5.17).
    health_path = "/health"
    models_path = "/v1/models"
    version_path = "/server_info"     # no /version: the JSON of /server_info has "version"
    # SGLang has no counter of accepted drafts: only verify steps (sglang:spec_verify_calls_total,
    # added per finished request). Accepted drafts over a window are derived from the emitted
    # tokens: every finished request's first token comes from prefill, every verify step emits
    # 1 + its accepted drafts (MetricNames.accepted_from).
    metrics = MetricNames(drafts="sglang:spec_verify_calls", accepted=None, draft_tokens=None,
                          accepted_per_pos=None, emitted_tokens="sglang:generation_tokens",
                          finished_requests="sglang:num_requests")
    # SGLang reads its API key from --api-key (or a --config YAML) only, from no environment variable.
    key_env: Optional[str] = None
    # What SGLang reads from its environment that changes what is measured (srt/environ.py): the
    # forced acceptance (its length is the run's forced level, not a setting: draft.forced_acceptance).
    measured_env = (SIMULATE_ACC_ENV, SIMULATE_TOKEN_MODE_ENV, SIMULATE_METHOD_ENV)
    forced_draw_per_batch = True  # spec_utils.py: one simulated length per verify call, for the whole batch

    def capabilities(self, version: Optional[str]) -> Capabilities:
        # per_request_stats: the chat endpoint returns meta_info (spec_verify_ct, ...) only with
        # return_meta_info=true, which it refuses on streamed requests; the benchmark streams.
        # probabilistic_drafting: for the known-answer probe's STANDALONE, no. Drafts are sampled from
        # the draft's distribution only with --speculative-use-rejection-sampling, which 0.5.17
        # refuses for anything but EAGLE/EAGLE3 (srt/arg_groups/speculative_hook.py).
        # synthetic_acceptance: SGLANG_SIMULATE_ACC_LEN (server environment, not a flag).
        v = parse_version(version)
        return Capabilities(per_request_stats=False, probabilistic_drafting=False, synthetic_acceptance=True,
                            version_known=v == READ_VERSION)

    def acceptance_source(self, requested: str, version: Optional[str]) -> AcceptanceSource:
        if requested == AcceptanceSource.PER_REQUEST_STATS.value:
            raise EngineError("SGLang returns per-request acceptance (meta_info) only on non-streamed requests and "
                              "the benchmark streams (fix: bench.acceptance_source=stream_chunks or auto)")
        return super().acceptance_source(requested, version)

    def acceptance_flags(self, source: AcceptanceSource, level: str = "detailed") -> list[str]:
        # Stream chunks need no server flag (stream_options asks for usage on each chunk);
        # --enable-metrics is always on with speculation, for the /metrics cross-check.
        return [METRICS_FLAG]

    def acceptance_flag_names(self) -> set[str]:
        return {METRICS_FLAG}

    def speculative_flags(self, config: dict) -> list[str]:
        """SGLang's flags for our speculative config ({"method", "model",
        "num_speculative_tokens", extra keys}). k drafts in a chain: --speculative-num-steps k,
        --speculative-eagle-topk 1, --speculative-num-draft-tokens k+1 (SGLang sets the last
        to steps+1 itself when topk is 1). Extra keys become --speculative-<key>."""
        method = config.get("method")
        if method not in ALGORITHMS:
            raise EngineError(f"draft.method={method} has no SGLang algorithm (fix: one of "
                              f"{', '.join(sorted(ALGORITHMS))} with server.engine=sglang)")
        bad = [k for k in VLLM_ONLY_KEYS if k in config]
        if bad:
            raise EngineError(f"{', '.join(bad)} is a vLLM speculative-config key that SGLang has no flag for (fix: "
                              "remove it from draft.extra / parallel.draft_tp / draft.forced_acceptance)")
        k = int(config["num_speculative_tokens"])
        f = [ALGORITHM_FLAG, ALGORITHMS[method]]
        if method in ("eagle3", "eagle", "draft_model"):
            if not config.get("model"):
                raise EngineError(f"draft.method={method} needs draft.model with server.engine=sglang "
                                  "(fix: set draft.model to the draft checkpoint)")
            f += [DRAFT_PATH_FLAG, str(config["model"])]
        elif method == "mtp" and config.get("model"):
            f += [DRAFT_PATH_FLAG, str(config["model"])]
        topk = int(config.get("eagle_topk", 1))
        if method == "ngram":
            # NGRAM: no steps; the verify window (default 12) and the breadth flags set the tree.
            f += [NUM_DRAFT_TOKENS_FLAG, str(int(config.get("num_draft_tokens", k + 1)))]
        else:
            if topk != 1 and "num_draft_tokens" not in config:
                raise EngineError(f"draft.extra.eagle_topk={topk} needs draft.extra.num_draft_tokens (the tree size; "
                                  "fix: set it, or eagle_topk=1 for a chain of k drafts)")
            f += [NUM_STEPS_FLAG, str(k), TOPK_FLAG, str(topk),
                  NUM_DRAFT_TOKENS_FLAG, str(int(config.get("num_draft_tokens", k + 1)))]
        if config.get("use_rejection_sampling"):
            if topk != 1 or ALGORITHMS[method] not in ("EAGLE", "EAGLE3"):
                raise EngineError("SGLang's rejection sampling takes EAGLE/EAGLE3 with a chain draft (topk=1) only "
                                  "(fix: drop draft.extra.use_rejection_sampling or draft.extra.eagle_topk)")
            f += [REJECTION_SAMPLING_FLAG]
        for key in sorted(set(config) - set(OWN_KEYS)):
            value = config[key]
            flag = "--speculative-" + key.replace("_", "-")
            if value is True:
                f.append(flag)
            elif value is not False and value is not None:
                f += [flag, str(value)]
        return f

    def speculative_flag_names(self) -> set[str]:
        """Flags that make the server speculative (dropped for its matched baseline)."""
        return {ALGORITHM_FLAG, DRAFT_PATH_FLAG, NUM_STEPS_FLAG, TOPK_FLAG, NUM_DRAFT_TOKENS_FLAG,
                REJECTION_SAMPLING_FLAG, METRICS_FLAG}

    def serving_flags(self, o: ServingOptions) -> list[str]:
        """The recipe's serving fields as SGLang flags (srt/server_args.py field names)."""
        f = ["--served-model-name", o.served_name]
        if o.tokenizer:
            f += ["--tokenizer-path", o.tokenizer]
        f += ["--tp-size", str(o.tp)]
        if o.pp > 1:
            f += ["--pp-size", str(o.pp)]
        if o.dp > 1:
            f += ["--dp-size", str(o.dp)]
        if o.ep > 1:
            f += ["--ep-size", str(o.ep)]
        if o.max_model_len:
            f += ["--context-length", str(o.max_model_len)]
        if o.max_num_batched_tokens:
            f += ["--chunked-prefill-size", str(o.max_num_batched_tokens)]
        if o.dtype:
            f += ["--dtype", o.dtype]
        if o.kv_cache_memory_bytes:
            # SGLang caps its KV pool in tokens, the target's and the draft's pools alike: the
            # recipe's budget in bytes over the bytes a token takes in both (launcher.login.kv_budget)
            if not o.kv_bytes_per_token:
                raise EngineError(f"server.kv_cache_memory_bytes={o.kv_cache_memory_bytes}: SGLang caps its KV pool in "
                                  "tokens (--max-total-tokens) and the model's config.json cannot be read here to "
                                  "convert bytes to tokens (fix: server.extra_args=[--max-total-tokens,<tokens>], or "
                                  "server.gpu_memory_utilization=<fraction>)")
            f += ["--max-total-tokens", str(parse_human_int(str(o.kv_cache_memory_bytes)) // o.kv_bytes_per_token)]
        if o.gpu_memory_utilization is not None:
            f += ["--mem-fraction-static", str(o.gpu_memory_utilization)]
        if o.enforce_eager:
            f += ["--disable-cuda-graph"]
        return f

    def server_argv(self, command: str, model: str, flags: list[str], host: str, port: int | str) -> list[str]:
        """`python -m sglang.launch_server --model-path M ...`; host and port are ours."""
        return (shlex.split(command) + ["--model-path", model] + drop_flags(list(flags), {"--host", "--port"})
                + ["--host", host, "--port", str(port)])

    def version_probe_argv(self, command: str) -> Optional[list[str]]:
        cmd = shlex.split(command)
        if len(cmd) < 2 or "-m" not in cmd[1:]:
            return None
        return [cmd[0], "-c", "import importlib.metadata as m; print(m.version('sglang'))"]

    def stream_options(self, source: AcceptanceSource) -> dict:
        # srt/entrypoints/openai/protocol.py StreamOptions has continuous_usage_stats: usage
        # (cumulative completion_tokens) on every chunk, as specdec_bench reads meta_info's.
        if source is AcceptanceSource.STREAM_CHUNKS:
            return {"stream_options": {"include_usage": True, "continuous_usage_stats": True}}
        return {}

    def self_draft_config(self, model: str, k: int, version: Optional[str]) -> dict:
        """STANDALONE with the target as its own draft. SGLang 0.5.17 drafts the argmax there
        (its rejection sampling, which samples drafts, is EAGLE/EAGLE3 only) and verifies a
        one-hot draft: every draft must be accepted at T = 0 only; at T > 0 a draft is accepted
        with the target's probability of it (validation asks for known_answer_allow_fail)."""
        return {"method": "draft_model", "model": model, "num_speculative_tokens": int(k)}

    def request_stats(self, response: dict) -> Optional[dict]:
        """The per-request stats of a non-streamed chat response asked with
        return_meta_info=true, in the shape the known-answer verdict reads."""
        choices = response.get("choices") or [{}]
        mi = (choices[0] or {}).get("meta_info") or response.get("meta_info") or {}
        if "spec_verify_ct" not in mi:
            return None
        hist = mi.get("spec_correct_drafts_histogram") or mi.get("spec_accept_histogram")
        out = {"num_spec_steps": int(mi["spec_verify_ct"]),
               "num_accepted_draft_tokens": int(mi.get("spec_num_correct_drafts", mi.get("spec_accepted_drafts", 0))),
               "num_draft_tokens": int(mi.get("spec_num_proposed_drafts", mi.get("spec_proposed_drafts", 0))),
               "completion_tokens": mi.get("completion_tokens")}
        if hist:
            out["acceptance_histogram"] = list(hist)
        return out

    def forced_acceptance_check(self, version: Optional[str], cpu: bool) -> None:
        """SGLang forces a mean length through SGLANG_SIMULATE_ACC_LEN (read in 0.5.17's source;
        other versions are assumed alike)."""
        return None

    def server_key(self, key: str, private_dir: Path) -> ServerKey:
        """SGLang reads its key from --api-key or a --config YAML only. The key goes in a YAML
        file readable by the job's user alone (0600, in ``private_dir``, outside the run's
        folders); the argv names the file, never the key; the node removes the file once the
        server is up (SGLang has read its arguments by then)."""
        fd, path = tempfile.mkstemp(prefix="sglang-key-", suffix=".yaml", dir=str(private_dir))
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, f"api-key: {_yaml_str(key)}\n".encode())
        finally:
            os.close(fd)
        return ServerKey(argv=[CONFIG_FLAG, path], files=[path])

    def acceptance_hint(self) -> str:
        return "SGLang returns per-request stats only unstreamed (fix: bench.acceptance_source=stream_chunks)"

    def forced_acceptance_config(self, length, rates) -> dict:
        """The engine-neutral forced keys (launcher.engines.forced_acceptance); speculative_env
        turns them into SGLang's environment. SGLang forces a mean length, not per-position rates."""
        if rates is not None:
            raise EngineError("SGLang forces a mean acceptance length only (SGLANG_SIMULATE_ACC_LEN), not "
                              "per-position rates (fix: draft.forced_acceptance.length=<AL> instead of .rates)")
        return fa.speculative_keys(length, None)

    def speculative_env(self, speculative_config) -> dict[str, str]:
        """SGLANG_SIMULATE_ACC_LEN for a forced config, with the token mode that keeps one streamed
        chunk per verify step (SIMULATE_TOKEN_MODE); {} otherwise."""
        forced = fa.forced_from_speculative_config(speculative_config)
        if not forced or forced.get("length") is None:
            return {}
        return {SIMULATE_ACC_ENV: f"{float(forced['length']):g}", SIMULATE_TOKEN_MODE_ENV: SIMULATE_TOKEN_MODE}

    def cpu_sampling_reason(self, gpus_per_node: int, cluster_name: str, server_env: Mapping[str, str]) -> Optional[str]:
        if gpus_per_node <= 0:
            return f"cluster '{cluster_name}' has no GPUs (cluster.gpus_per_node=0)"
        return None

    def memory_flag_names(self) -> set[str]:
        return set(MEMORY_FLAGS)

    def multinode_flags(self, node_rank: int, nodes: int, head: str, rpc_port: int, tp: int, pp: int, dp: int,
                        gpus_per_node: int) -> list[str]:
        """SGLang's multi-node flags (srt/server_args.py): --nnodes, --node-rank and the
        rendezvous --dist-init-addr HOST:PORT; the head (rank 0) serves the API. Not run."""
        if nodes <= 1:
            return []
        return ["--nnodes", str(nodes), "--node-rank", str(node_rank), "--dist-init-addr", f"{head}:{rpc_port}"]

    def read_user_args(self, server_args: Sequence[str], model: str) -> UserServerArgs:
        raise EngineError("run.sh starts vLLM servers only (fix: a recipe with engine=sglang, python -m launcher)")

    chosen_settings = staticmethod(chosen_settings)  # its ServerArgs line's overlap scheduling
    inferred_chosen_settings = staticmethod(inferred_chosen_settings)  # 0.5.17's rule

    def recipe_problems(self, facts: RecipeFacts) -> list[tuple[str, str, str]]:
        return recipe_problems(self, facts)


def recipe_problems(eng: "SGLang", facts: RecipeFacts) -> list[tuple[str, str, str]]:
    """A vLLM image, a draft method without an SGLang algorithm, a known-answer probe at T > 0,
    a forced length set by hand in the server's environment."""
    if SIMULATE_ACC_ENV in (facts.server_env or {}):
        v = facts.server_env[SIMULATE_ACC_ENV]
        return [(f"server.env.{SIMULATE_ACC_ENV}", "forces the acceptance behind the launcher's back (its "
                 "identity, label and forced verdict would not know it)",
                 f"remove it and set draft.forced_acceptance.length={v} (or sweep.forced_acceptance_lengths=[{v}])")]
    image = (facts.container_image or "").rsplit("/", 1)[-1]
    if image.startswith("vllm"):
        return [("cluster.container_image", f"is {facts.container_image}, a vLLM image, with server.engine=sglang",
                 f"engine=sglang sets the SGLang image; or set cluster.container_image={eng.default_image}")]
    if facts.draft_method not in ("none",) + tuple(ALGORITHMS):
        return [("draft.method", f"is {facts.draft_method}, which SGLang has no algorithm for",
                 f"use one of: {', '.join(sorted(ALGORITHMS))} with server.engine=sglang")]
    if (facts.known_answer and not facts.known_answer_allow_fail and facts.draft_method != "none"
            and not eng.capabilities(facts.engine_version).probabilistic_drafting
            and any(t > 0 for t in facts.temperatures)):
        return [("bench.known_answer", "sglang's self-draft probe drafts the argmax, so at T > 0 "
                 "its drafts are not all accepted (docs/sglang.md)",
                 "bench.known_answer_allow_fail=true, or sweep.temperatures=[0]")]
    return []


def _yaml_str(value: str) -> str:
    """A YAML double-quoted scalar (JSON's string escapes are YAML's)."""
    return json.dumps(value)


__all__ = ["SGLang", "ALGORITHMS", "SIMULATE_ACC_ENV"]
