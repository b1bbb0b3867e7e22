#!/usr/bin/env bash
# The main job on a single-GPU machine reached only by a remote command runner (H100 or H200), one stage per call.
#
# The machine is offline and keeps only /tmp between calls (while it stays warm), and one
# call carries at most 64 MiB: the vLLM bundle of shared/gpu/build_bundle.sh travels in
# four parts, one per call. Stages, in order and back to back:
#
#   bash tests/gpu/run_gpu_smoke.sh part 1      # carry .vb/p01 (then part 2, part 3)
#   bash tests/gpu/run_gpu_smoke.sh unpack      # carry .vb/p04 .gpu_models .gpu_data [.gpu_prev]; checks imports
#   bash tests/gpu/run_gpu_smoke.sh identical   # recipe=gpu_smoke: identical draft, known-answer probe T 0/0.7
#   bash tests/gpu/run_gpu_smoke.sh noisy       # draft=tiny_noisy with the matched baseline
#   bash tests/gpu/run_gpu_smoke.sh forced      # forced AL 1.5/2.5/3.5 at k=3, then speedup + report
#   bash tests/gpu/run_gpu_smoke.sh parity      # carry .specdec_ref (a Model-Optimizer tree: .specdec_ref/examples/specdec_bench):
#                                               # specdec_bench and ours on the same GPU, paired AL and TPS
#
# `unpack` may be chained with `identical` in one call ("unpack identical"): stages are
# arguments, run in order. Each stage copies what it produced (results, logs, raw AIPerf
# exports) under $OUT/<stage>. .gpu_models holds the tiny models of
# common/setup/make_tiny_models.py (tiny-target, tiny-draft-identical, tiny-draft-noisy);
# .gpu_data the MT-Bench and Spec-Bench question files (provenance in docs/gpu.md).
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/out}
RES=/tmp/res
mkdir -p "$OUT"

env_setup() {
  export PYTHONPATH=/tmp/site:$REPO
  export SPECDEC_HOME=/tmp/sh
  export SPECDEC_MTBENCH=/tmp/data/mt_bench_question.jsonl
  export SPECDEC_SPECBENCH=/tmp/data/spec_bench_question.jsonl
  export VLLM_USE_FLASHINFER_SAMPLER=0
  # HF_HUB_OFFLINE goes to the server only (recipe server.env): AIPerf rejects a local
  # tokenizer path with it set.
  unset HF_HUB_OFFLINE
}

save() {  # save STAGE: speedup and report over what ran so far, then the results and logs
  if [ -d "$RES/gpu_smoke" ]; then
    python3 -m launcher.speedup "$RES/gpu_smoke" > "$OUT/$1.speedup.log" 2>&1; echo "speedup rc=$?"
    tail -30 "$OUT/$1.speedup.log"
    python3 -m launcher.report "$RES/gpu_smoke" > "$OUT/$1.report.log" 2>&1; echo "report rc=$?"
    tail -3 "$OUT/$1.report.log"
  fi
  [ -d "$RES" ] && tar czf "$OUT/$1.results.tgz" -C "$(dirname "$RES")" "$(basename "$RES")"  # too deep to come back as folders
  du -sh "$OUT/$1.results.tgz" 2>/dev/null
}

launch() {  # launch STAGE OVERRIDES...: the product's main command
  local stage=$1; shift
  local t0=$(date +%s)
  python3 -m launcher recipe=gpu_smoke sweep.num_requests=32 output_dir=$RES wait=true "$@" \
    > "$OUT/$stage.launcher.log" 2>&1
  local rc=$?
  echo "[$stage] launcher rc=$rc in $(( $(date +%s) - t0 )) s"
  tail -40 "$OUT/$stage.launcher.log"
  return $rc
}

for stage in "$@"; do
  case "$stage" in
    part)  ;;  # the number follows
    1|2|3)
      mkdir -p /tmp/parts && cp "$REPO"/.vb/p0"$stage"/* /tmp/parts/ && (cd /tmp/parts && sha256sum -c --ignore-missing SHA256SUMS) ;;
    unpack)
      mkdir -p /tmp/parts && cp "$REPO"/.vb/p04/* /tmp/parts/ && bash /tmp/parts/unpack.sh || exit $?
      mkdir -p /tmp/sh/models /tmp/data
      cp -r "$REPO"/.gpu_models/* /tmp/sh/models/ && cp "$REPO"/.gpu_data/*.jsonl /tmp/data/
      # results of earlier stages of a machine that went cold (their tarballs, carried back)
      for t in "$REPO"/.gpu_prev/*.results.tgz; do [ -f "$t" ] && tar xzf "$t" -C /tmp && echo "restored $t"; done
      env_setup
      nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
      python3 - <<'PY' | tee "$OUT/versions.txt"
import importlib, sys
print("python", sys.version.split()[0])
for m in ["vllm", "aiperf", "torch", "transformers", "hydra", "omegaconf", "submitit", "rich",
          "matplotlib", "boto3", "pynvml", "yaml", "httpx", "launcher"]:
    try:
        mod = importlib.import_module(m)
        print(m, getattr(mod, "__version__", "ok"))
    except Exception as e:  # noqa: BLE001 - a report of what is missing
        print(m, "MISSING", type(e).__name__, e)
PY
      ;;
    identical)
      env_setup
      launch identical bench.known_answer=true
      save identical ;;
    noisy)
      env_setup
      launch noisy draft=tiny_noisy sweep.baseline=true bench.known_answer=false
      save noisy ;;
    forced)
      env_setup
      for al in 1.5 2.5 3.5; do
        launch forced_$al draft=tiny_noisy draft.forced_acceptance.length=$al bench.known_answer=false \
          sweep.datasets=[mtbench] sweep.temperatures=[0.0]
      done
      save forced ;;
    parity)
      env_setup
      python3 -u "$REPO"/tests/benchmarks/bench_parity_specdec_bench.py "$REPO"/.specdec_ref --gpu \
        --mtbench /tmp/data/mt_bench_question.jsonl --questions 32 --concurrency 4 --output-length 32 \
        --out /tmp/parity > "$OUT/parity.log" 2>&1; echo "parity rc=$?"; tail -30 "$OUT/parity.log"
      mkdir -p "$OUT/parity" && cp -r /tmp/parity/* "$OUT/parity/" 2>/dev/null ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
done
