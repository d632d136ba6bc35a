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

--smoke runs the same code with 20 tasks and one round (about half a minute), writing its results to a temporary
directory (or --out), never to bench/results/: tests/integration/test_bench_smoke.py runs it, so that make bench
cannot rot. A failed ansible-playbook run, or a callback that recorded nothing where it is on, exits non-zero.
"""

import argparse
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
# The checkout as the collection pvegpu.llmstack (make link): ansible-playbook finds the audit_log callback there.
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
TASKS = 500
ROUNDS = int(os.environ.get("BENCH_AUDIT_ROUNDS", "5"))
SMOKE_TASKS, SMOKE_ROUNDS = 20, 1


def playbook(path, changed, tasks):
    lines = ["---", "- name: %d no-op tasks" % tasks, "  hosts: localhost", "  gather_facts: false", "  tasks:"]
    for n in range(tasks):
        lines += ["    - name: No-op %d" % n, "      ansible.builtin.debug:", "        msg: task %d" % n]
        if changed:
            lines.append("      changed_when: true")
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")


def run(book, audit, config, **env):
    environment = dict(os.environ, ANSIBLE_CONFIG=config, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
                       ANSIBLE_STDOUT_CALLBACK="ansible.builtin.null", ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                       LLMSTACK_AUDIT_LOG=audit, ANSIBLE_FORKS="1")
    environment.update(env)
    start = time.monotonic()
    # stderr is kept (it is empty on a good run) to say why a run failed.
    result = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-c", "local", "-i", "localhost,", book],
                            cwd=ROOT, env=environment, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    elapsed = time.monotonic() - start
    if result.returncode != 0:
        raise RuntimeError("ansible-playbook %s (ANSIBLE_CONFIG=%s) exited with %d:\n%s"
                           % (book, config, result.returncode, result.stderr[-3000:]))
    return elapsed


def count_lines(path):
    with open(path, "rb") as handle:
        return sum(1 for _line in handle)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true",
                        help="%d tasks, %d round; results to a temporary directory (the tests run this)"
                             % (SMOKE_TASKS, SMOKE_ROUNDS))
    parser.add_argument("--out", help="the results file (default bench/results/audit-log.json; with --smoke a "
                                      "temporary directory's)")
    args = parser.parse_args(argv)
    tasks, rounds = (SMOKE_TASKS, SMOKE_ROUNDS) if args.smoke else (TASKS, ROUNDS)
    if not os.path.isfile(os.path.join(COLLECTIONS, "ansible_collections", "pvegpu", "llmstack", "galaxy.yml")):
        print("bench_audit_log: %s/ansible_collections/pvegpu/llmstack is missing: run make link" % COLLECTIONS)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        noop, changed = os.path.join(tmp, "noop.yml"), os.path.join(tmp, "changed.yml")
        playbook(noop, False, tasks)
        playbook(changed, True, tasks)
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
        for _round in range(rounds):
            for name, (book, config, env) in configs.items():
                audit = os.path.join(tmp, "audit-%s.jsonl" % name)
                if os.path.exists(audit):
                    os.unlink(audit)
                times[name].append(run(book, audit, config, **env))
                records[name] = count_lines(audit) - 1 if os.path.exists(audit) else 0
    median = {name: statistics.median(values) for name, values in times.items()}
    baseline = {"on": "off", "on+ok": "off", "on+changed": "off+changed", "on+fsync": "off+changed"}
    results = {"smoke": args.smoke, "tasks": tasks, "rounds": rounds, "cpus": os.cpu_count(),
               "machine": platform.platform(), "median_s": median, "runs_s": times, "records": records,
               "overhead_pct": {name: 100.0 * (median[name] / median[base] - 1) for name, base in baseline.items()}}
    out = args.out or os.path.join(tempfile.mkdtemp(prefix="bench-smoke-") if args.smoke
                                   else os.path.join(ROOT, "bench", "results"), "audit-log.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
    print("audit_log callback, %d no-op tasks, median of %d runs (target: < 10 %% slower)" % (tasks, rounds))
    print("%-12s %10s %9s %10s" % ("config", "median (s)", "records", "overhead"))
    for name in configs:
        over = results["overhead_pct"].get(name)
        shown = "" if over is None else "%+.1f %%" % over
        print("%-12s %10.2f %9d %10s" % (name, median[name], records[name], shown))
    print("written to %s" % out)
    # The callback off records nothing; on, at least the play start and the stats, and each changed task.
    silent = [name for name in configs if name.startswith("on") and records[name] < (tasks if "changed" in name else 1)]
    if silent or any(records[name] for name in configs if name.startswith("off")):
        print("bench_audit_log: the callback did not record what it should (records above): is it enabled in "
              "ansible.cfg and the collection linked (make link)?")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
