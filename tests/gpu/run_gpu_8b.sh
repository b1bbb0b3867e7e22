#!/usr/bin/env bash
# recipe=gpu_8b on a single-GPU machine reached only by a remote command runner (H100 or H200), one stage list per call
# (issue 32; docs/gpu.md). The machine is offline, keeps only /tmp between calls (while it
# stays warm) and one call carries at most 64 MiB, so the vLLM bundle of
# shared/gpu/build_bundle.sh travels in four parts, one per call, and the 8B-shaped models
# are built on the machine (common/setup/make_shaped_models.py; ~18.5 GB, nothing travels).
#
#   bash tests/gpu/run_gpu_8b.sh 1 | 2 | 3                  # carry .vb/p01 (then p02, p03)
#   bash tests/gpu/run_gpu_8b.sh unpack models base         # carry .vb/p04 .gpu_data [.gpu_prev]
#   bash tests/gpu/run_gpu_8b.sh k3:2.5 k3:k+1 k3:1.5       # later calls (models: kept while warm)
#   bash tests/gpu/run_gpu_8b.sh parity                     # carry .specdec_ref: specdec_bench side by side
#
# Stages, run in order:
#   1 2 3     copy part N to /tmp/parts and check it
#   unpack    copy part 4, join and unpack the bundle into /tmp/site (at once if already there),
#             copy the MT-Bench questions (.gpu_data) and earlier results (.gpu_prev/*.results.tgz)
#   models    build the 8B-shaped target and 1B-shaped draft into /tmp/sh/models/shaped-8b
#             (seconds when they are there already); timings in $OUT/models.json
#   kK:L[+base]  one server: python3 -m launcher recipe=gpu_8b with sweep.num_speculative_tokens=[K]
#             sweep.forced_acceptance_lengths=[L] (L a number or k+1); +base adds the matched
#             baseline (sweep.baseline=true: one restart of the same server without speculation;
#             run it once, the later invocations land beside it in /tmp/res/gpu_8b); EXTRA adds
#             overrides, e.g. EXTRA="sweep.repeats=3 sweep.server_starts=2" (issue 37)
#   base      the matched baseline alone (draft=none: the same server without speculation, in
#             the folder sweep.baseline=true would use), instead of a +base stage
#   e3:L      (optional) the EAGLE3-shaped head (built on first use, seconds) at k=3 and forced AL L:
#             draft=llama8b_shaped_eagle3, whether vLLM 0.26 serves a random EAGLE3 head
#   qmodels   build the Qwen3-8B-shaped target, DFlash draft and EAGLE3 head into
#             /tmp/sh/models/shaped-qwen3-8b (issue 38; ~19.3 GB beside shaped-8b's 19.3 GB)
#   qd:L[+base]  the seed's recipe=qwen3_dflash, model=qwen3_8b_shaped draft=qwen3_8b_shaped_dflash,
#             k=15 (block size 16), forced AL L (a number or k+1); +base adds the matched baseline
#   qe:L[+base]  recipe=qwen3_eagle3 with model=qwen3_8b_shaped draft=qwen3_8b_shaped_eagle3, k=3
#   le:L[+base]  recipe=llama31_eagle3 with model=llama8b_shaped draft=llama8b_shaped_eagle3, k=3
#             (the head is built on first use, as e3's)
#   qd:base qe:base le:base  that recipe's baseline alone (draft=none, in the folder +base uses)
#             The seed's recipes run with the GPU machine's settings (SEED_LOCAL below: the local
#             executor with one GPU, sweep=gpu_8b's workload, gpu_8b's server settings), each in
#             /tmp/res/<recipe>; their golden references are skipped (random weights).
#   facts     the machine: CPU model, cores, load, busiest processes, GPU clocks, power limits
#             and clock-event reasons ($OUT/machine_facts.txt)
#   parity    tests/benchmarks/bench_parity_specdec_bench.py on the same model, forced AL 2.5, k=3,
#             C 1/8/32 (specdec_bench's in-process engine against ours)
# SGLang 0.5.17 (docs/sglang.md; its own site, common/setup/gpu_bundle/build_sglang_bundle.sh into
# .sglb with PART_MIB=50 so a part and the checkout fit one call):
#   sN        copy SGLang part N (carry .sglb/pNN; N = 1..11), one per call like 1 2 3
#   sunpack   the last SGLang part (carry .sglb/p12 .gpu_data), joined and unpacked into
#             /tmp/sglang-site by the checkout's unpack.sh; the tiny models of
#             common/setup/make_tiny_models.py from .gpu_data/models into $SH/models
#   sgl:ka    the known answer on recipe=gpu_smoke_context_free (passes despite STANDALONE's shift)
#   sgl:ka_tiny  the known answer on recipe=gpu_smoke's tiny target, T=0, C=1 (the documented defect)
#   sgl:forced   recipe=gpu_smoke with draft=tiny_noisy, draft.forced_acceptance.length=2.5, T=0
#   sgl:ngram    recipe=gpu_smoke with draft=ngram (k=4)
#   sle:L[+base] recipe=llama31_eagle3 engine=sglang with the shaped Llama target and EAGLE3 head, k=3,
#             forced AL L; +base adds its matched SGLang baseline (the seed's settings as for le:)
# After the stages: launcher.speedup and launcher.report over /tmp/res/gpu_8b, the results
# tarred to $OUT/<call>.results.tgz, nvidia-smi before and after, the seconds of each stage
# in $OUT/timings.txt.
#
# DRY=1 runs the same stage logic on a CPU machine: parts are checked but not unpacked, the
# models are built at the small shape with $BUILD_PYTHON (a Python with torch: the vllm
# venv), and the launcher plans (dry_run=true) instead of running.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/out}
DRY=${DRY:-0}
RES=${RES:-/tmp/res}
SH=${SPECDEC_HOME_DIR:-/tmp/sh}
MODELS=$SH/models/shaped-8b
PARTS=${PARTS:-/tmp/parts}
DATA=${DATA:-/tmp/data}
PARITY_DIR=${PARITY_DIR:-/tmp/parity}
PY=${PY:-python3}
BUILD_PYTHON=${BUILD_PYTHON:-$PY}
QMODELS=$SH/models/shaped-qwen3-8b
# The seed's recipes (qwen3_dflash, qwen3_eagle3, llama31_eagle3) on the GPU machine: what
# recipe=gpu_8b sets, as overrides (docs/gpu.md, "The seed's recipes with shaped drafts").
SEED_LOCAL=(cluster=local cluster.gpus_per_node=1 sweep=gpu_8b "server.command=python3 -m vllm.entrypoints.cli.main serve"
  server.enforce_eager=false server.ready_timeout_s=900 server.kv_cache_memory_bytes=16G "server.extra_args=[--max-num-seqs,64]"
  server.env.HF_HUB_OFFLINE=1 server.env.VLLM_USE_FLASHINFER_SAMPLER=0 "bench.aiperf=python3 -m aiperf"
  bench.point_timeout_s=600 bench.known_answer=false)
mkdir -p "$OUT"
CALL=$(echo "$*" | tr ' :+' '_-p' | tr -cd 'A-Za-z0-9_.-' | cut -c1-60)
: > "$OUT/timings.txt"

env_setup() {  # env_setup [sglang]: SGLang's site first (its pins differ from the vLLM bundle's)
  if [ "$DRY" = 1 ]; then
    export PYTHONPATH=$REPO
  elif [ "${1:-}" = sglang ]; then
    export PYTHONPATH=/tmp/sglang-site:/tmp/site:$REPO
  else
    export PYTHONPATH=/tmp/site:$REPO
  fi
  export SPECDEC_HOME=$SH
  export SPECDEC_MTBENCH=$DATA/mt_bench_question.jsonl
  export VLLM_USE_FLASHINFER_SAMPLER=0
  # HF_HUB_OFFLINE goes to the server only (recipe server.env): AIPerf rejects a local
  # tokenizer path with it set.
  unset HF_HUB_OFFLINE
}

facts() {  # the machine a figure comes from: CPU, cores, load, GPU clocks and power limits
  {
    echo "== date"; date -u
    echo "== lscpu"; lscpu 2>&1 | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|NUMA node|MHz|Hypervisor|Virtualization" 
    echo "== nproc $(nproc)"; echo "== loadavg $(cat /proc/loadavg)"
    echo "== /proc/stat cpu"; head -1 /proc/stat
    echo "== busiest processes"; ps -eo pid,pcpu,pmem,comm --sort=-pcpu 2>/dev/null | head -8
    # one host core's speed (the draft-model path is bound by one: docs/gpu.md), the product's own
    # figure (every point's host.one_core_ms): the best of 5 runs of 2e6 Python-level additions, in ms
    echo "== one core: $(cd "$REPO" && python3 -c 'from launcher.runtime.machine import one_core_ms; print(one_core_ms())') ms for 2e6 Python additions (best of 5)"
    # the host's cost of one GPU kernel launch (a draft-model step launches hundreds): the best of
    # 5 runs of 20,000 in-place adds on a 16-element tensor, in µs a launch
    echo "== kernel launch: $(python3 -c 'import sys, time
try:
    import torch; assert torch.cuda.is_available()
except Exception: print("no CUDA"); sys.exit()
x = torch.zeros(16, device="cuda"); best = 1e9
for _ in range(5):
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(20000): x.add_(1)
    torch.cuda.synchronize(); best = min(best, time.perf_counter() - t)
print(round(best / 20000 * 1e6, 2), "us a launch (best of 5 x 20,000 adds)")' 2>&1 | tail -1)"
    echo "== nvidia-smi"; nvidia-smi --query-gpu=name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,enforced.power.limit,temperature.gpu,clocks_event_reasons.active,persistence_mode,compute_mode --format=csv 2>&1
    nvidia-smi -q -d PERFORMANCE,CLOCK 2>&1 | head -60
  } > "$OUT/machine_facts.txt" 2>&1
  cat "$OUT/machine_facts.txt" | head -40
}

gpu_snapshot() {  # gpu_snapshot NAME
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version,temperature.gpu,clocks.sm \
      --format=csv > "$OUT/nvidia-smi.$1.csv" 2>&1
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv >> "$OUT/nvidia-smi.$1.csv" 2>&1
  else
    echo "no nvidia-smi" > "$OUT/nvidia-smi.$1.csv"
  fi
}

timed() {  # timed NAME CMD...: run, record its seconds
  local name=$1; shift
  local t0=$(date +%s)
  "$@"
  local rc=$?
  echo "$name rc=$rc $(( $(date +%s) - t0 )) s" | tee -a "$OUT/timings.txt"
  return $rc
}

part() {
  if [ ! -d "$REPO/.vb/p0$1" ]; then echo "part $1: .vb/p0$1 not carried"; return 3; fi
  mkdir -p "$PARTS" && cp "$REPO"/.vb/p0"$1"/* "$PARTS"/ && (cd "$PARTS" && sha256sum -c --ignore-missing SHA256SUMS)
}

unpack() {
  part 4 || return $?
  if [ "$DRY" = 1 ]; then
    echo "DRY: not unpacking (bash $PARTS/unpack.sh)"
  else
    bash "$PARTS"/unpack.sh || return $?
  fi
  mkdir -p "$DATA"
  cp "$REPO"/.gpu_data/mt_bench_question.jsonl "$DATA"/ || { echo "carry .gpu_data (MT-Bench questions)"; return 2; }
  for t in "$REPO"/.gpu_prev/*.results.tgz; do  # results of a machine that went cold, carried back
    [ -f "$t" ] && tar xzf "$t" -C "$(dirname "$RES")" && echo "restored $t"
  done
  env_setup
  $PY - <<'PY' | tee "$OUT/versions.txt"
import importlib, sys
print("python", sys.version.split()[0])
for m in ["vllm", "aiperf", "torch", "transformers", "tokenizers", "safetensors", "hydra", "omegaconf",
          "submitit", "pynvml", "launcher"]:
    try:
        mod = importlib.import_module(m)
        print(m, getattr(mod, "__version__", "ok"))
    except Exception as e:  # noqa: BLE001 - a report of what is missing
        print(m, "MISSING", type(e).__name__, e)
PY
  return 0
}

models() {
  env_setup
  local shape=full
  [ "$DRY" = 1 ] && shape=small
  $BUILD_PYTHON "$REPO"/common/setup/make_shaped_models.py "$MODELS" --shape $shape --report "$OUT/models.json"
  local rc=$?
  df -h /tmp | tail -1 | tee -a "$OUT/timings.txt"
  du -sh "$MODELS"/* 2>/dev/null | tee -a "$OUT/timings.txt"
  return $rc
}

launch() {  # launch kK:L[+base]
  local spec=${1#k} base=false
  case "$spec" in *+base) base=true; spec=${spec%+base} ;; esac
  local k=${spec%%:*} level=${spec#*:}
  env_setup
  local dry=()
  [ "$DRY" = 1 ] && dry=(dry_run=true)
  local log="$OUT/k${k}_${level/+/p}.launcher.log"
  # shellcheck disable=SC2086  # EXTRA: more overrides, e.g. "sweep.repeats=3 sweep.server_starts=2"
  $PY -m launcher recipe=gpu_8b output_dir="$RES" wait=true "sweep.num_speculative_tokens=[$k]" \
    "sweep.forced_acceptance_lengths=[$level]" sweep.baseline=$base ${EXTRA:-} "${dry[@]}" > "$log" 2>&1
  local rc=$?
  echo "[k=$k L=$level baseline=$base] launcher rc=$rc"
  tail -25 "$log"
  return $rc
}

baseline() {
  env_setup
  local dry=()
  [ "$DRY" = 1 ] && dry=(dry_run=true)
  $PY -m launcher recipe=gpu_8b draft=none "sweep.forced_acceptance_lengths=[]" sweep.baseline=false \
    output_dir="$RES" wait=true "${dry[@]}" > "$OUT/base.launcher.log" 2>&1
  local rc=$?
  echo "[baseline] launcher rc=$rc"
  tail -25 "$OUT/base.launcher.log"
  return $rc
}

eagle3() {  # eagle3 L
  env_setup
  local shape=full dry=()
  [ "$DRY" = 1 ] && { shape=small; dry=(dry_run=true); }
  $BUILD_PYTHON "$REPO"/common/setup/make_shaped_models.py "$MODELS" --shape $shape --only eagle3 || return $?
  local log="$OUT/eagle3_${1/+/p}.launcher.log"
  $PY -m launcher recipe=gpu_8b draft=llama8b_shaped_eagle3 output_dir="$RES" wait=true \
    "sweep.num_speculative_tokens=[3]" "sweep.forced_acceptance_lengths=[$1]" sweep.baseline=false "${dry[@]}" > "$log" 2>&1
  local rc=$?
  echo "[eagle3 k=3 L=$1] launcher rc=$rc"
  tail -25 "$log"
  return $rc
}

qmodels() {
  env_setup
  local shape=full
  [ "$DRY" = 1 ] && shape=small
  $BUILD_PYTHON "$REPO"/common/setup/make_shaped_models.py "$QMODELS" --model qwen3_8b --shape $shape \
    --only target,dflash,eagle3 --report "$OUT/qmodels.json"
  local rc=$?
  du -sh "$QMODELS"/* 2>/dev/null | tee -a "$OUT/timings.txt"
  return $rc
}

seed() {  # seed qd|qe|le L[+base] | base: one server of a seed recipe with its shaped model and draft
  local which=$1 spec=$2 base=false recipe model draft k
  case "$which" in
    qd) recipe=qwen3_dflash; model=qwen3_8b_shaped; draft=qwen3_8b_shaped_dflash; k=15 ;;
    qe) recipe=qwen3_eagle3; model=qwen3_8b_shaped; draft=qwen3_8b_shaped_eagle3; k=3 ;;
    le) recipe=llama31_eagle3; model=llama8b_shaped; draft=llama8b_shaped_eagle3; k=3 ;;
  esac
  env_setup
  local shape=full dry=()
  [ "$DRY" = 1 ] && { shape=small; dry=(dry_run=true); }
  if [ "$which" = le ]; then  # the Llama head, beside the models stage's target (seconds when built)
    $BUILD_PYTHON "$REPO"/common/setup/make_shaped_models.py "$MODELS" --shape $shape --only eagle3 || return $?
  fi
  local sel=("draft=$draft" "sweep.num_speculative_tokens=[$k]" "sweep.forced_acceptance_lengths=[${spec%+base}]")
  case "$spec" in
    base) sel=(draft=none "sweep.forced_acceptance_lengths=[]") ;;
    *+base) base=true ;;
  esac
  local log="$OUT/${which}_${spec//+/p}.launcher.log"
  # shellcheck disable=SC2086  # EXTRA: more overrides, e.g. "sweep.repeats=3 sweep.server_starts=2"
  $PY -m launcher recipe=$recipe model=$model "${sel[@]}" "${SEED_LOCAL[@]}" sweep.baseline=$base \
    output_dir="$RES" wait=true ${EXTRA:-} "${dry[@]}" > "$log" 2>&1
  local rc=$?
  echo "[$recipe $spec k=$k] launcher rc=$rc"
  tail -25 "$log"
  return $rc
}

parity() {
  env_setup
  if [ ! -f "$REPO/.specdec_ref/examples/specdec_bench/run.py" ]; then
    echo "parity: carry .specdec_ref (a Model-Optimizer tree with examples/specdec_bench)"; return 2
  fi
  local dry=()
  [ "$DRY" = 1 ] && dry=(--plan-only)
  $PY -u "$REPO"/tests/benchmarks/bench_parity_specdec_bench.py "$REPO"/.specdec_ref --gpu "${dry[@]}" \
    --target "$MODELS/target" --draft "$MODELS/draft" --served-name llama8b-shaped --k 3 --forced-al 2.5 \
    --mtbench "$DATA"/mt_bench_question.jsonl --questions 32 --concurrency 1 8 32 --output-length 256 \
    --ignore-eos --max-model-len 4096 --out "$PARITY_DIR" > "$OUT/parity.log" 2>&1
  local rc=$?
  echo "parity rc=$rc"; tail -30 "$OUT/parity.log"
  tar czf "$OUT/parity.tgz" -C "$(dirname "$PARITY_DIR")" "$(basename "$PARITY_DIR")" 2>/dev/null
  return $rc
}

spart() {  # spart N: copy SGLang part N to /tmp/sgl-parts
  local d; d=$(printf '%s/.sglb/p%02d' "$REPO" "$1")
  if [ ! -d "$d" ]; then echo "SGLang part $1: $d not carried"; return 3; fi
  mkdir -p /tmp/sgl-parts && cp "$d"/* /tmp/sgl-parts/ && (cd /tmp/sgl-parts && sha256sum -c --ignore-missing SHA256SUMS | tail -1)
}

sunpack() {  # the last SGLang part, the checkout's unpack.sh, the tiny models
  local last; last=$(ls -d "$REPO"/.sglb/p* 2>/dev/null | tail -1)
  [ -n "$last" ] || { echo "sunpack: carry the last .sglb part"; return 3; }
  mkdir -p /tmp/sgl-parts && cp "$last"/* /tmp/sgl-parts/ && cp "$REPO"/common/setup/gpu_bundle/unpack.sh /tmp/sgl-parts/
  if [ "$DRY" = 1 ]; then echo "DRY: not unpacking (bash /tmp/sgl-parts/unpack.sh)"; else
    PYTHONPATH=/tmp/site bash /tmp/sgl-parts/unpack.sh /tmp || return $?; fi
  mkdir -p "$SH/models" "$DATA"
  cp -r "$REPO"/.gpu_data/models/tiny-* "$SH/models/" || { echo "carry .gpu_data (tiny models)"; return 2; }
  cp "$REPO"/.gpu_data/mt_bench_question.jsonl "$DATA"/ || return 2
  env_setup sglang
  [ "$DRY" = 1 ] && return 0
  $PY -c "import sglang, sgl_kernel, flashinfer, aiperf, launcher; print('sglang', sglang.__version__)" 2>&1 | tail -1
}

SGL_COMMON=(engine=sglang "server.extra_args=[--attention-backend,triton]" sweep.num_requests=32 "sweep.datasets=[mtbench]"
  output_dir="$RES" wait=true)

sgl() {  # sgl ka|ka_tiny|forced|ngram: the tiny model on SGLang through the main command
  env_setup sglang
  local sel dry=()
  [ "$DRY" = 1 ] && dry=(dry_run=true)
  case "$1" in
    ka) sel=(recipe=gpu_smoke_context_free) ;;
    ka_tiny) sel=(recipe=gpu_smoke bench.known_answer=true "sweep.temperatures=[0.0]" "sweep.concurrencies=[1]") ;;
    forced) sel=(recipe=gpu_smoke draft=tiny_noisy draft.forced_acceptance.length=2.5 bench.known_answer=false
                 "sweep.temperatures=[0.0]") ;;
    ngram) sel=(recipe=gpu_smoke draft=ngram '~draft.extra.prompt_lookup_min' '~draft.extra.prompt_lookup_max'
                bench.known_answer=false) ;;
    *) echo "sgl: unknown $1"; return 2 ;;
  esac
  $PY -m launcher "${sel[@]}" "${SGL_COMMON[@]}" "${dry[@]}" > "$OUT/sgl_$1.launcher.log" 2>&1
  local rc=$?
  echo "[sgl:$1] launcher rc=$rc"; tail -30 "$OUT/sgl_$1.launcher.log"
  return $rc
}

sle() {  # sle L[+base]: Llama-3.1-8B shape with its EAGLE3 head on SGLang, k=3, forced AL L
  local spec=$1 base=false
  case "$spec" in *+base) base=true; spec=${spec%+base} ;; esac
  env_setup sglang
  local shape=full dry=()
  [ "$DRY" = 1 ] && { shape=small; dry=(dry_run=true); }
  $BUILD_PYTHON "$REPO"/common/setup/make_shaped_models.py "$MODELS" --shape $shape --only eagle3 || return $?
  # the seed's GPU-machine settings (SEED_LOCAL) in SGLang's words: its command and attention backend,
  # --max-running-requests for vLLM's --max-num-seqs, the same 16G KV budget (--max-total-tokens)
  $PY -m launcher recipe=llama31_eagle3 engine=sglang model=llama8b_shaped draft=llama8b_shaped_eagle3 \
    "sweep.num_speculative_tokens=[3]" "sweep.forced_acceptance_lengths=[$spec]" sweep.baseline=$base \
    cluster=local cluster.gpus_per_node=1 sweep=gpu_8b server.enforce_eager=false server.ready_timeout_s=900 \
    server.kv_cache_memory_bytes=16G "server.extra_args=[--attention-backend,triton,--max-running-requests,64]" \
    server.env.HF_HUB_OFFLINE=1 "bench.aiperf=python3 -m aiperf" bench.point_timeout_s=600 bench.known_answer=false \
    output_dir="$RES" wait=true ${EXTRA:-} "${dry[@]}" > "$OUT/sle_${1//+/p}.launcher.log" 2>&1
  local rc=$?
  echo "[sglang llama31_eagle3 $1] launcher rc=$rc"; tail -25 "$OUT/sle_${1//+/p}.launcher.log"
  return $rc
}

snapshot() {  # the results so far, tarred (a call cut short still brings back what completed)
  [ -d "$RES" ] && tar czf "$OUT/$CALL.results.tgz" -C "$(dirname "$RES")" "$(basename "$RES")"
  return 0
}

save() {  # speedup and report over each recipe's results so far, then the results
  env_setup
  local d name
  for d in "$RES"/*/; do
    [ -d "$d" ] || continue
    name=$(basename "$d")
    $PY -m launcher.speedup "$d" > "$OUT/speedup.$name.log" 2>&1; echo "speedup $name rc=$?"
    tail -40 "$OUT/speedup.$name.log"
    $PY -m launcher.report "$d" > "$OUT/report.$name.log" 2>&1; echo "report $name rc=$?"
    tail -3 "$OUT/report.$name.log"
  done
  if [ -d "$RES" ]; then
    tar czf "$OUT/$CALL.results.tgz" -C "$(dirname "$RES")" "$(basename "$RES")"  # too deep to come back as folders
    du -sh "$OUT/$CALL.results.tgz"
  fi
}

gpu_snapshot "before"
status=0
ran_launcher=0
for stage in "$@"; do
  case "$stage" in
    1|2|3) timed "part$stage" part "$stage" || exit $? ;;
    facts) facts ;;
    unpack) timed unpack unpack || exit $? ;;
    models) timed models models || exit $? ;;
    k*:*) ran_launcher=1; timed "$stage" launch "$stage" || status=1; snapshot ;;
    base) ran_launcher=1; timed base baseline || status=1; snapshot ;;
    e3:*) ran_launcher=1; timed "$stage" eagle3 "${stage#e3:}" || status=1; snapshot ;;
    qmodels) timed qmodels qmodels || exit $? ;;
    qd:?*|qe:?*|le:?*) ran_launcher=1; timed "$stage" seed "${stage%%:*}" "${stage#*:}" || status=1; snapshot ;;
    parity) timed parity parity || status=1 ;;
    s[0-9]|s[0-9][0-9]) timed "$stage" spart "${stage#s}" || exit $? ;;
    sunpack) timed sunpack sunpack || exit $? ;;
    sgl:*) ran_launcher=1; timed "$stage" sgl "${stage#sgl:}" || status=1; snapshot ;;
    sle:?*) ran_launcher=1; timed "$stage" sle "${stage#sle:}" || status=1; snapshot ;;
    *) echo "unknown stage $stage (stages: 1 2 3 facts unpack models qmodels base kK:L[+base] e3:L qd:L[+base] qe:L[+base] le:L[+base] qd:base qe:base le:base parity)"; exit 2 ;;
  esac
done
[ "$ran_launcher" = 1 ] && timed save save
gpu_snapshot "after"
cat "$OUT/timings.txt"
exit $status
