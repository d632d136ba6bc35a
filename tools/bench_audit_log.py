# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the audit_log callback costs a run (make bench; read by people, never asserted in tests).

A 500-task playbook of no-op tasks (ansible.builtin.debug, connection local) is run with the callback off and
on, wall time per run, median of ROUNDS runs each (the configurations take turns, so a slow moment of the
machine hits all of them). Target (issue #10): < 10 % slower with the callback on.

Configurations:
  off          callbacks_enabled emptied: the baseline
  on           the default: nothing changes, so only the play start and the stats are recorded
  on+ok        record_ok: every one of the 500 results is sealed and appended (the callback's full work)
  on+changed   every task reports changed (changed_when: true), recorded by default: the same 500 records
  on+fsync     as on+changed, with an fsync after every line
Results to bench/results/audit-log.json.
"""

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.path.dirname(sys.executable)
TASKS = 500
ROUNDS = int(os.environ.get("BENCH_AUDIT_ROUNDS", "5"))


def playbook(path, changed):
    lines = ["---", "- name: %d no-op tasks" % TASKS, "  hosts: localhost", "  gather_facts: false", "  tasks:"]
    for n in range(TASKS):
        lines += ["    - name: No-op %d" % n, "      ansible.builtin.debug:", "        msg: task %d" % n]
        if changed:
            lines.append("      changed_when: true")
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")


def run(book, audit, config, **env):
    environment = dict(os.environ, ANSIBLE_CONFIG=config,
                       ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
                       ANSIBLE_STDOUT_CALLBACK="ansible.builtin.null", ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                       LLMSTACK_AUDIT_LOG=audit, ANSIBLE_FORKS="1")
    environment.update(env)
    start = time.monotonic()
    subprocess.run([os.path.join(BIN, "ansible-playbook"), "-c", "local", "-i", "localhost,", book], cwd=ROOT,
                   env=environment, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start


def count_lines(path):
    with open(path, "rb") as handle:
        return sum(1 for _line in handle)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        noop, changed = os.path.join(tmp, "noop.yml"), os.path.join(tmp, "changed.yml")
        playbook(noop, False)
        playbook(changed, True)
        # "off": the project's ansible.cfg without the line that enables the callback.
        plain = os.path.join(tmp, "ansible.cfg")
        with open(os.path.join(ROOT, "ansible.cfg")) as source, open(plain, "w") as target:
            for line in source:
                if not line.startswith("callbacks_enabled"):
                    target.write(line.replace("./.cache", os.path.join(ROOT, ".cache")))
        project = os.path.join(ROOT, "ansible.cfg")
        configs = {
            "off": (noop, plain, {}),
            "on": (noop, project, {}),
            "on+ok": (noop, project, {"LLMSTACK_AUDIT_RECORD_OK": "1"}),
            "off+changed": (changed, plain, {}),
            "on+changed": (changed, project, {}),
            "on+fsync": (changed, project, {"LLMSTACK_AUDIT_FSYNC": "1"}),
        }
        times = {name: [] for name in configs}
        records = {}
        for _round in range(ROUNDS):
            for name, (book, config, env) in configs.items():
                audit = os.path.join(tmp, "audit-%s.jsonl" % name)
                if os.path.exists(audit):
                    os.unlink(audit)
                times[name].append(run(book, audit, config, **env))
                records[name] = count_lines(audit) - 1 if os.path.exists(audit) else 0
    median = {name: statistics.median(values) for name, values in times.items()}
    baseline = {"on": "off", "on+ok": "off", "on+changed": "off+changed", "on+fsync": "off+changed"}
    results = {"tasks": TASKS, "rounds": ROUNDS, "cpus": os.cpu_count(), "machine": platform.platform(),
               "median_s": median, "runs_s": times, "records": records,
               "overhead_pct": {name: 100.0 * (median[name] / median[base] - 1) for name, base in baseline.items()}}
    out = os.path.join(ROOT, "bench", "results", "audit-log.json")
    with open(out, "w") as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
    print("audit_log callback, %d no-op tasks, median of %d runs (target: < 10 %% slower)" % (TASKS, ROUNDS))
    print("%-12s %10s %9s %10s" % ("config", "median (s)", "records", "overhead"))
    for name in configs:
        over = results["overhead_pct"].get(name)
        shown = "" if over is None else "%+.1f %%" % over
        print("%-12s %10.2f %9d %10s" % (name, median[name], records[name], shown))
    print("written to %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
