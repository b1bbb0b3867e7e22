#!/usr/bin/env bash
# Stop the single-node Slurm cluster started by common/setup/slurm_up.sh:
# slurmd, slurmctld, and slurmdbd + MariaDB when slurm_up started them.
# munged is left running (harmless, and other tools may use it).
# Only the processes recorded in the state dir's pid files are signalled.
#
#   common/setup/slurm_down.sh           # stop the daemons, keep state + config
#   common/setup/slurm_down.sh --purge   # also delete the state dir and the
#                                        # /etc/slurm files slurm_up wrote
set -euo pipefail
# SPECDEC_SLURM_NODES=N (N >= 2): the separate multi-node test cluster instead
# (common/setup/slurm_multinode.sh, selected with SLURM_CONF); this one is untouched.
if [ -n "${SPECDEC_SLURM_NODES:-}" ] && [ "${SPECDEC_SLURM_NODES}" != 1 ]; then
  exec bash "$(dirname "${BASH_SOURCE[0]}")/slurm_multinode.sh" down "$@"
fi
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
log() { printf '[slurm_down] %s\n' "$*" >&2; }

SPECDEC_HOME="${SPECDEC_HOME:-$HOME/.cache/specdec-launcher}"
STATE="${SPECDEC_SLURM_STATE:-$SPECDEC_HOME/slurm}"
ETC=/etc/slurm
MARK="# managed by specdec-launcher common/setup/slurm_up.sh"
PURGE=0
[ "${1:-}" = "--purge" ] && PURGE=1

if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    exec sudo -E SPECDEC_SLURM_STATE="$STATE" bash "$0" "$@"
  fi
  log "must run as root"; exit 1
fi
[ -d "$STATE" ] || { echo "slurm: down (no state dir $STATE)"; exit 0; }

exec 9>"$STATE/.lock"
flock -w 300 9 || { log "could not lock $STATE/.lock"; exit 1; }

RUND="$STATE/run"
pid_alive() {
  local p
  [ -s "$1" ] || return 1
  p="$(cat "$1" 2>/dev/null)" || return 1
  [ -n "$p" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$2" ] &&
    ! awk '{exit !($3 == "Z")}' "/proc/$p/stat" 2>/dev/null  # a zombie is not alive
}
stop_pid() {  # stop_pid PIDFILE COMM
  pid_alive "$1" "$2" || { rm -f "$1"; return 0; }
  local p i; p="$(cat "$1")"
  log "stopping $2 (pid $p)"
  kill -TERM "$p" 2>/dev/null || true
  for i in $(seq 1 75); do pid_alive "$1" "$2" || break; sleep 0.2; done
  if pid_alive "$1" "$2"; then log "$2 ignored SIGTERM; killing"; kill -KILL "$p" 2>/dev/null || true; sleep 0.2; fi
  rm -f "$1"
}

stop_pid "$RUND/slurmd.pid" slurmd
stop_pid "$RUND/slurmctld.pid" slurmctld
stop_pid "$RUND/slurmdbd.pid" slurmdbd
if [ -f "$RUND/mariadb.started-by-us" ]; then
  if command -v mysqladmin >/dev/null 2>&1 && mysqladmin ping >/dev/null 2>&1; then
    log "stopping MariaDB"
    mysqladmin shutdown >/dev/null 2>&1 || true
  fi
  rm -f "$RUND/mariadb.started-by-us"
fi

if [ "$PURGE" = 1 ]; then
  for f in slurm.conf gres.conf slurmdbd.conf; do
    if [ -f "$ETC/$f" ] && grep -qF "$MARK" "$ETC/$f"; then rm -f "$ETC/$f"; fi
  done
  rm -rf "$STATE"
  echo "slurm: down (purged $STATE)"
else
  echo "slurm: down (state kept in $STATE)"
fi
