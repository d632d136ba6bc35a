#!/usr/bin/env bash
# make test: every stage of CI, each one's time printed, in two lanes on the 2-core CI machine.
#   lane 1: lint, sanity, units, integration, one after the other (integration uses both cores: pytest -n 2)
#   lane 2: molecule, from the start, in the background (MOLECULE_JOBS scenarios side by side)
# Molecule mostly waits on podman and apt (three scenarios side by side used 250 s of CPU in 290 s on 2 cores),
# so running it beside the CPU-bound stages fills the idle time instead of adding its wall time to theirs.
# Its scenarios have their own containers (llmstack-molecule-*) and ports; nothing is shared with lane 1.
# Exit status: non-zero when any stage failed; molecule's output is printed when it ends (its per-scenario logs
# stay under .cache/molecule-logs/). TEST_LANES=0 runs every stage one after the other (molecule after units), to
# compare the two on a given machine.
set -uo pipefail
make=${MAKE:-make}
stages=${TEST_STAGES:-lint sanity units integration}
mkdir -p .cache
mlog=.cache/molecule-stage.log
rm -f "$mlog" .cache/molecule-stage.rc
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
# the run is interrupted, nothing of molecule is left running.
# shellcheck disable=SC2016 # expanded by the bash that setsid starts
setsid bash -c 'start=$(date +%s); rc=0; $0 --no-print-directory molecule >"$1" 2>&1 || rc=$?
  echo "$rc $(( $(date +%s) - start ))" >"$2"' "$make" "$mlog" .cache/molecule-stage.rc &
molecule_pid=$!
stop_molecule() { kill -TERM -- "-$molecule_pid" 2>/dev/null || true; }
trap 'stop_molecule; exit 130' INT TERM
echo "== make test: molecule started in the background (output: $mlog)"

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
    echo "== make test: stopping molecule (a stage failed)"
    stop_molecule
    break
  fi
done

echo "== make test: waiting for molecule"
wait "$molecule_pid" || true
cat "$mlog"
molecule_rc=1
molecule_s="?"
if [ -f .cache/molecule-stage.rc ]; then
  read -r molecule_rc molecule_s <.cache/molecule-stage.rc
fi
if [ "$molecule_rc" -eq 0 ]; then
  echo "== make test: molecule took ${molecule_s}s (beside the other stages)"
else
  echo "== make test: molecule FAILED (exit $molecule_rc) after ${molecule_s}s"
  failed="$failed molecule"
fi
echo "== make test: all stages took $(( $(date +%s) - overall ))s"
if [ -n "$failed" ]; then
  echo "make test: failed:$failed"
  exit 1
fi
echo "make test: all stages passed"
