#!/bin/sh
# Stand-in "source" of gpu-burn for the burnin role's tests: building it installs a gpu_burn that replays a recorded
# public gpu-burn output (/etc/llmstack-standin/burn.fixture) spread over the run's seconds, and the compare file
# gpu_burn needs in its working directory.
set -e
cp gpu_burn.in gpu_burn
chmod 0755 gpu_burn
echo "stand-in compare file" > compare.ptx
