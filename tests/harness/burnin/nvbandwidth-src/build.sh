#!/bin/sh
# Stand-in "source" of nvbandwidth for the burnin role's tests: building it installs an nvbandwidth that prints the
# recorded public output named by /etc/llmstack-standin/nvbandwidth.fixture and records its arguments.
set -e
cp nvbandwidth.in nvbandwidth
chmod 0755 nvbandwidth
