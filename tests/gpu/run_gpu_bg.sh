#!/usr/bin/env bash
# Stages of tests/gpu/run_gpu_8b.sh that outlast one remote call (10 minutes at most): the first
# call starts them in the background (setsid: they run on while the machine stays warm, i.e.
# while the next call follows within ~30 s), every call waits up to WAIT_S and brings back what
# is there so far. A profiler (py-spy, carried as .whl) samples the engine core during each
# C=1 repeat (issue 37: where the engine's time goes at batch 1).
#
#   bash tests/gpu/run_gpu_bg.sh start STAGES...   # carry .vb/p04 .gpu_data .whl (parts 1-3 carried before)
#   bash tests/gpu/run_gpu_bg.sh wait              # the next calls, until it prints "finished"
#
# Env: EXTRA (launcher overrides for every kK:L stage), WAIT_S (default 240). A machine taken
# back during a call returns nothing of that call (2026-12-07: 274 s of stages lost), so the calls
# are short: each brings back every point finished so far, at no device time of its own (the
# stages run on between calls either way).
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BG=/tmp/gpu_bg
WAIT_S=${WAIT_S:-240}
mode=${1:-wait}; shift || true
mkdir -p "$BG/out"

profiler() {  # py-spy the engine core for 8 s at each new C=1 repeat of any job
  local spy=/tmp/pyspy/bin/py-spy seen="" n=0
  [ -x "$spy" ] || return 0
  while [ ! -f "$BG/done" ]; do
    sleep 1
    local prog line pid key
    prog=$(ls -t /tmp/res/*/*/progress.json 2>/dev/null | head -1)
    [ -n "$prog" ] || continue
    line=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('current',''))" "$prog" 2>/dev/null)
    case "$line" in *" C=1 "*|*" C=1:"*) ;; *) continue ;; esac
    key="$prog|$(echo "$line" | grep -o 'repeat [0-9]*' || true)|$(stat -c %i "$(dirname "$prog")/logs/server.log" 2>/dev/null)"
    case "$seen" in *"[$key]"*) continue ;; esac
    seen="$seen[$key]"
    pid=$(pgrep -f "EngineCore" | head -1)
    [ -n "$pid" ] || continue
    n=$((n + 1))
    echo "$(date -u +%T) $line (pid $pid)" >> "$BG/out/pyspy_index.txt"
    timeout 20 "$spy" record --pid "$pid" --duration 8 --rate 200 --nonblocking --format raw \
      -o "$BG/pyspy/p$n.txt" >> "$BG/pyspy.log" 2>&1 || true
  done
}

if [ "$mode" = start ]; then
  rm -rf "$BG"; mkdir -p "$BG/out" "$BG/pyspy"
  if ls "$REPO"/.whl/py_spy-*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/pyspy "$REPO"/.whl/py_spy-*.whl > "$BG/pyspy.log" 2>&1
  fi
  # the background shell lets go of this call's stdout: a caller's pipe (| tail) ends with this call
  (cd "$REPO" && OUT="$BG/out" setsid nohup bash tests/gpu/run_gpu_8b.sh "$@" > "$BG/run.log" 2>&1; touch "$BG/done") \
    < /dev/null > /dev/null 2>&1 &
  (setsid nohup bash "$0" profile > /dev/null 2>&1 &)
elif [ "$mode" = profile ]; then
  profiler; exit 0
fi
t0=$(date +%s)
while [ ! -f "$BG/done" ] && [ $(( $(date +%s) - t0 )) -lt "$WAIT_S" ]; do sleep 5; done
[ -f "$BG/done" ] && echo "finished" || echo "still running after ${WAIT_S} s"
tail -40 "$BG/run.log"
# what comes back: at most 8 files; results without the other repeats' raw AIPerf exports
if [ -d /tmp/res ] && [ -n "$(ls -A /tmp/res 2>/dev/null)" ]; then  # every recipe's folder (gpu_8b, qwen3_dflash, ...)
  tar czf "$OUT/results_slim.tgz" -C /tmp/res --exclude='aiperf_repeats' --exclude='profile_export_raw.jsonl' \
    --exclude='*.parquet' . 2>/dev/null
fi
[ -d "$BG/pyspy" ] && tar czf "$OUT/pyspy.tgz" -C "$BG" pyspy pyspy.log 2>/dev/null
cp "$BG/run.log" "$OUT/run.log" 2>/dev/null
for f in timings.txt machine_facts.txt models.json pyspy_index.txt; do
  [ -f "$BG/out/$f" ] && cp "$BG/out/$f" "$OUT/"
done
ls -la "$OUT"
