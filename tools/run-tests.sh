#!/usr/bin/env bash
# make test: every stage of CI, each one's time printed, in two lanes on the 2-core CI machine.
#   lane 1: integration (pytest -n 2), from the start
#   lane 2: molecule from the start, in the background (MOLECULE_JOBS scenarios side by side), then sanity, lint, units
# The critical path is the lab test (tests/integration/test_lab.py: one bring-up, three site.yml runs and the tests
# that read the lab; about two thirds of integration), so integration starts at once instead of after lint and units
# (about 290 s in CI): in CI lane 2 ended about 880 s before lane 1 (molecule 1955 + sanity 153 beside lint 238 +
# units 49 + integration 2704 s), so lint and units now fill lane 2's idle end instead of delaying the lab.
# Molecule mostly waits on podman and apt (three scenarios side by side used 250 s of CPU in 290 s on 2 cores), so
# running it beside the CPU-bound stages fills the idle time instead of adding its wall time to theirs.
# Lane 2's scenarios have their own containers (llmstack-molecule-*) and ports; nothing is shared with lane 1.
# Exit status: non-zero when any stage failed; lane 2's output is printed when it ends (molecule's per-scenario
# logs stay under .cache/molecule-logs/). TEST_LANES=0 runs every stage one after the other (molecule after units),
# to compare the two on a given machine.
set -uo pipefail
make=${MAKE:-make}
stages=${TEST_STAGES:-integration}
lane2=${TEST_LANE2:-molecule sanity lint units}
mkdir -p .cache
mlog=.cache/lane2.log
rm -f "$mlog" .cache/lane2.rc
overall=$(date +%s)

if [ "${TEST_LANES:-1}" = 0 ]; then
  for stage in lint sanity units molecule integration; do
    start=$(date +%s)
    echo "== make test: $stage"
    $make --no-print-directory "$stage" || { echo "== make test: $stage FAILED after $(( $(date +%s) - start ))s"; exit 1; }
    echo "== make test: $stage took $(( $(date +%s) - start ))s"
  done
  echo "== make test: all stages took $(( $(date +%s) - overall ))s"
  echo "make test: all stages passed"
  exit 0
fi

# lane 2, in its own process group (setsid) so that it can be stopped as a whole: when a stage of lane 1 fails, or
# the run is interrupted, nothing of it is left running. Each of its stages writes "stage rc seconds" to lane2.rc;
# every stage runs even when one before it failed (sanity's findings still count when a scenario failed).
# shellcheck disable=SC2016 # expanded by the bash that setsid starts
setsid bash -c 'for stage in $3; do start=$(date +%s); rc=0
    echo "== lane 2: $stage" >>"$1"; $0 --no-print-directory "$stage" >>"$1" 2>&1 || rc=$?
    echo "$stage $rc $(( $(date +%s) - start ))" >>"$2"
  done' "$make" "$mlog" .cache/lane2.rc "$lane2" &
lane2_pid=$!
stop_lane2() { kill -TERM -- "-$lane2_pid" 2>/dev/null || true; }
trap 'stop_lane2; exit 130' INT TERM
echo "== make test: lane 2 ($lane2) started in the background (output: $mlog)"

# lane 1
failed=""
for stage in $stages; do
  start=$(date +%s)
  echo "== make test: $stage"
  if $make --no-print-directory "$stage"; then
    echo "== make test: $stage took $(( $(date +%s) - start ))s"
  else
    echo "== make test: $stage FAILED after $(( $(date +%s) - start ))s"
    failed="$failed $stage"
    echo "== make test: stopping lane 2 (a stage failed)"
    stop_lane2
    break
  fi
done

echo "== make test: waiting for lane 2 ($lane2)"
wait "$lane2_pid" || true
cat "$mlog"
for stage in $lane2; do
  line=$(grep "^$stage " .cache/lane2.rc 2>/dev/null || true)
  if [ -z "$line" ]; then
    echo "== make test: $stage did not finish (lane 2 was stopped)"
    failed="$failed $stage"
    continue
  fi
  read -r _name stage_rc stage_s <<<"$line"
  if [ "$stage_rc" -eq 0 ]; then
    echo "== make test: $stage took ${stage_s}s (lane 2, beside the other stages)"
  else
    echo "== make test: $stage FAILED (exit $stage_rc) after ${stage_s}s (lane 2)"
    failed="$failed $stage"
  fi
done
echo "== make test: all stages took $(( $(date +%s) - overall ))s"
if [ -n "$failed" ]; then
  echo "make test: failed:$failed"
  exit 1
fi
echo "make test: all stages passed"
