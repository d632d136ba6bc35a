#!/usr/bin/env bash
# Run every molecule scenario given, JOBS at a time (make molecule: MOLECULE_JOBS, default 3). Each scenario has its
# own containers (unique platform names) and molecule state (and no prerun install, which they would race on), so
# they can run side by side; with the pipelined podman connection a scenario mostly waits on podman, so three at a
# time finish in about half the time of one at a time on 2 cores. Each scenario's output goes to
# .cache/molecule-logs/<scenario>.log and its time is printed; a failed scenario's log is printed at the end.
set -euo pipefail
jobs=${MOLECULE_JOBS:-3}
logs=.cache/molecule-logs
mkdir -p "$logs"
rm -f "$logs"/*.log "$logs"/*.failed
one() {
  local s=$1 start rc=0
  start=$(date +%s)
  molecule test -s "$s" >"$logs/$s.log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "== molecule $s: passed in $(( $(date +%s) - start ))s"
  else
    echo "== molecule $s: FAILED (exit $rc) in $(( $(date +%s) - start ))s"
    touch "$logs/$s.failed"
  fi
}
export -f one
export logs
# shellcheck disable=SC2016 # $1 is expanded by the bash that xargs starts
printf '%s\n' "$@" | xargs -P "$jobs" -I{} bash -c 'one "$1"' _ {}
failed=""
for marker in "$logs"/*.failed; do
  [ -e "$marker" ] || continue
  name=${marker##*/}
  failed="$failed ${name%.failed}"
done
if [ -n "$failed" ]; then
  for s in $failed; do
    echo "================ molecule $s: the last 300 lines of $logs/$s.log"
    tail -n 300 "$logs/$s.log"
  done
  echo "molecule: failed: $failed"
  exit 1
fi
echo "molecule: all $# scenarios passed"
