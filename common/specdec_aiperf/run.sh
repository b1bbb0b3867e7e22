#!/usr/bin/env bash
# Serve one model and benchmark it, on this node.
#
#   run.sh [SERVER ARGS...] -- [BENCH ARGS...]
#
# Starts `$SPECDEC_SERVER_CMD $HF_MODEL_CKPT [SERVER ARGS...]` (default command
# `vllm serve`; --per-request-spec-decode-metrics detailed is added with a
# --speculative-config unless set), waits until it is ready, runs
# `$SPECDEC_PYTHON -m $SPECDEC_BENCH_MODULE [BENCH ARGS...] --url http://HOST:PORT`,
# stops the server and exits with the benchmark's status.
#
# Environment: HF_MODEL_CKPT (required), SPECDEC_SERVER_CMD, SPECDEC_HOST
# (bind host, default 127.0.0.1), SPECDEC_PORT (default: a free port),
# SPECDEC_READY_TIMEOUT (s, default 1800), SPECDEC_JOB_DIR (default
# ./specdec_job_<timestamp>), SPECDEC_PYTHON (default python3),
# SPECDEC_BENCH_MODULE (default launcher.bench).
#
# Works from a hand-written sbatch script or an interactive allocation, e.g.
#   export HF_MODEL_CKPT=/models/Llama-3.1-8B-Instruct SPECDEC_HOST=0.0.0.0
#   bash common/specdec_aiperf/run.sh --served-model-name llama \
#       --speculative-config '{"method":"eagle3","model":"/models/eagle3","num_speculative_tokens":3}' \
#       -- --model llama --mtbench data/mtbench.jsonl --save_dir "$SPECDEC_JOB_DIR"
# It writes the job spec these arguments describe to $SPECDEC_JOB_DIR/job.json
# (unless the launcher wrote one) and runs it; launcher jobs run
# `python -m launcher.node.serve_and_bench --spec JOB_DIR/job.json` directly.
# The lifecycle lives in launcher/node/.
set -euo pipefail

py="${SPECDEC_PYTHON:-python3}"
if ! "$py" -c 'import launcher.node.serve_and_bench' >/dev/null 2>&1; then
    repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    export PYTHONPATH="${repo_root}${PYTHONPATH:+:${PYTHONPATH}}"
fi
exec "$py" -m launcher.node.serve_and_bench "$@"
