#!/usr/bin/env bash
# A Docker engine for CI and tests: `engine.sh start|stop|status`.
#
# start   uses the engine that answers on the socket if there is one (and then `stop` leaves it
#         alone); else starts Debian's dockerd (package docker.io) in the background with no bridge
#         and no iptables rules, so the host's links and firewall stay as they were, and waits
#         until it answers.
# stop    ends the dockerd that `start` started, by the PID it wrote, and waits for it to exit.
# status  exits 0 when an engine answers on the socket.
#
# The state (dockerd.pid, dockerd.log) lives in $FAULTLAB_ENGINE_DIR (default /run/faultlab-engine).
set -euo pipefail

SOCKET=/var/run/docker.sock
STATE_DIR=${FAULTLAB_ENGINE_DIR:-/run/faultlab-engine}
PID_FILE=$STATE_DIR/dockerd.pid
LOG_FILE=$STATE_DIR/dockerd.log
DOCKERD=${DOCKERD:-/usr/sbin/dockerd}
START_TIMEOUT_S=${ENGINE_START_TIMEOUT_S:-30}
# dockerd gives running containers 15 s to stop on SIGTERM before it kills them.
STOP_TIMEOUT_S=${ENGINE_STOP_TIMEOUT_S:-45}

say() { echo "engine: $*"; }
fail() { echo "engine: $*" >&2; exit 1; }

# An engine answers when its /_ping does; the docker CLI comes with docker.io, as dockerd does.
answers() {
  [ -S "$SOCKET" ] || return 1
  if command -v curl >/dev/null; then
    curl -sf --max-time 3 --unix-socket "$SOCKET" http://engine/_ping >/dev/null 2>&1
  else
    timeout 5 docker --host "unix://$SOCKET" version --format '{{.Server.Version}}' >/dev/null 2>&1
  fi
}

# A zombie counts as gone: dockerd outlives its starting shell, so it is not ours to reap.
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# The PID in our pid file, if that process is still a dockerd; a reused PID does not count.
our_pid() {
  local pid
  [ -f "$PID_FILE" ] || return 1
  pid=$(cat "$PID_FILE")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$DOCKERD")" ] || return 1
  echo "$pid"
}

start() {
  local pid waited=0
  if pid=$(our_pid); then
    answers || fail "dockerd $pid (started by engine.sh) does not answer on $SOCKET; see $LOG_FILE"
    say "dockerd $pid (started earlier by engine.sh) answers on $SOCKET"
    return
  fi
  rm -f "$PID_FILE"
  if answers; then
    say "an engine already answers on $SOCKET: using it (stop will leave it running)"
    return
  fi
  [ "$(id -u)" = 0 ] || fail "starting dockerd needs root"
  [ -x "$DOCKERD" ] || fail "$DOCKERD is missing: apt-get install docker.io (make install does it as root)"
  mkdir -p "$STATE_DIR"
  # setsid: the daemon outlives the shell that started it and is not hit by its terminal's signals.
  # With no job control the child is no group leader, so setsid execs dockerd in place and $! is
  # dockerd's own PID.
  setsid "$DOCKERD" --host "unix://$SOCKET" --bridge=none --iptables=false --ip6tables=false \
    </dev/null >"$LOG_FILE" 2>&1 &
  pid=$!
  echo "$pid" >"$PID_FILE"
  until answers; do
    if ! alive "$pid"; then
      rm -f "$PID_FILE"
      echo "engine: dockerd exited while starting; the end of $LOG_FILE:" >&2
      tail -n 15 "$LOG_FILE" >&2
      exit 1
    fi
    if [ "$waited" -ge $((START_TIMEOUT_S * 10)) ]; then
      echo "engine: dockerd $pid did not answer on $SOCKET within ${START_TIMEOUT_S}s;" \
        "it is still running (engine.sh stop ends it); the end of $LOG_FILE:" >&2
      tail -n 15 "$LOG_FILE" >&2
      exit 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  say "started dockerd $pid in $((waited / 10)).$((waited % 10))s (log: $LOG_FILE)"
}

stop() {
  local pid waited=0
  if ! pid=$(our_pid); then
    rm -f "$PID_FILE"
    say "no dockerd started by engine.sh is running: nothing to stop"
    return
  fi
  kill -TERM "$pid"
  while alive "$pid"; do
    if [ "$waited" -ge $((STOP_TIMEOUT_S * 10)) ]; then
      fail "dockerd $pid still runs ${STOP_TIMEOUT_S}s after SIGTERM; see $LOG_FILE"
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  rm -f "$PID_FILE"
  say "stopped dockerd $pid in $((waited / 10)).$((waited % 10))s"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status)
    if answers; then say "an engine answers on $SOCKET"; else say "no engine answers on $SOCKET"; exit 1; fi
    ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
