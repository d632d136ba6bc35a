# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmarks (make bench), read by people, never asserted in tests.

1. Inventory validation on large sites: hosts, problems found, best of 5 wall times, peak traced memory.
   Target: 1,000 hosts well under a second on one core, so the check adds nothing noticeable to a run.
2. Parsing a sysfs tree (pci_iommu_facts) of 300 and 1,200 PCI devices. Target: 300 devices well under a
   second (issue #3).
3. vllm_plan: 20 models over 8 GPUs (automatic placement, NVLink-aware, each model asking for a fraction) and
   the seed's platform A. Target: 20 models over 8 GPUs under a second (issue #6).
Results to bench/results/module-utils.json.

--smoke runs the same code with tiny sizes and one round (seconds), writing its results to a temporary directory
(or --out), never to bench/results/: tests/integration/test_bench_smoke.py runs it, so that make bench cannot rot.
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import tracemalloc

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# The checkout as ansible_collections.pvegpu.llmstack (make link), as tests/integration/conftest.py imports it: the
# module_utils import each other by their collection names.
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
if not os.path.isfile(os.path.join(COLLECTIONS, "ansible_collections", "pvegpu", "llmstack", "galaxy.yml")):
    sys.exit("bench: %s/ansible_collections/pvegpu/llmstack is missing: run make link" % COLLECTIONS)
sys.path.insert(0, COLLECTIONS)
sys.path.insert(0, HERE)

import sysfs_fixture  # noqa: E402
from ansible_collections.pvegpu.llmstack.plugins.module_utils import inventory_model, nvidia, pci, vllm_plan  # noqa: E402,I001

SITES = (("seeds (2 PVE hosts)", (2, 1, 3)), ("rack (16 PVE, 4 VMs each)", (16, 4, 50)),
         ("large (100 PVE, 4 VMs each)", (100, 4, 500)), ("huge (250 PVE, 4 VMs each)", (250, 4, 1000)))
SYSFS_DEVICES = (300, 1200)
ROUNDS = 5


def site(pve_hosts, vms_per_host, clients):
    """A valid model: PVE hosts with GPU VMs (4 GPUs, 3 models each), one gateway, many clients."""
    vlans = {"mgmt": {"id": 10, "cidr": "10.10.0.0/16", "gateway": "10.10.0.1"},
             "inference": {"id": 20, "cidr": "10.20.0.0/16", "gateway": "10.20.0.1"},
             "apps": {"id": 30, "cidr": "10.30.0.0/16", "gateway": "10.30.0.1"}}
    hosts, groups = {}, {"pve_hosts": [], "gpu_vms": [], "llm_gateways": ["gw"], "llm_clients": []}
    for p in range(pve_hosts):
        name = "pve-%d" % p
        groups["pve_hosts"].append(name)
        address = "10.10.%d.%d" % (1 + p // 250, 2 + p % 250)
        hosts[name] = {"llmstack_interfaces": [{"vlan": "mgmt", "address": address}]}
        for v in range(vms_per_host):
            n = p * vms_per_host + v
            vm = "vm-%d" % n
            groups["gpu_vms"].append(vm)
            hosts[vm] = {
                "gpu_vm_node": name, "gpu_vm_vmid": 100 + n,
                "gpu_vm_gpus": ["0000:%02x:00" % (0x10 + v * 4 + g) for g in range(4)],
                "gpu_vm_api_token_id": "ansible@pve!llmstack", "gpu_vm_api_token_secret": "0123456789abcdef0123",
                # What a first run of a VM needs (the check refuses a VM without them, #33 item 6).
                "gpu_vm_api_host": "10.10.1.2", "guest_image_mirror": "http://deb.debian.org/debian",
                "guest_image_authorized_keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDwyngojZfNGnYM8XwCf1zqN ops"],
                "llmstack_interfaces": [{"vlan": "inference", "address": "10.20.%d.%d" % (1 + n // 250, 2 + n % 250)}],
                # Catalog models, as a site names them: the check sizes each VM's model disk from their weights.
                "vllm_models": [{"name": m, "model": repo, "port": 8001 + i}
                                for i, (m, repo) in enumerate((("fast", "meta-llama/Llama-3.1-8B-Instruct"),
                                                               ("balanced", "Qwen/Qwen2.5-14B-Instruct-AWQ"),
                                                               ("reasoning", "Qwen/QwQ-32B-AWQ")))],
            }
    hosts["gw"] = {"llmstack_interfaces": [{"vlan": "inference", "address": "10.20.200.1"}],
                   "litellm_fallbacks": {"reasoning": ["balanced", "fast"], "balanced": ["fast"]},
                   "litellm_clients": [{"alias": "c%d" % c, "models": ["fast"], "max_budget": 5,
                                        "budget_duration": "30d"} for c in range(clients)]}
    for c in range(clients):
        name = "client-%d" % c
        groups["llm_clients"].append(name)
        address = "10.30.%d.%d" % (1 + c // 250, 2 + c % 250)
        hosts[name] = {"llmstack_interfaces": [{"vlan": "apps", "address": address}]}
    for data in hosts.values():
        data["llmstack_vlans"] = vlans
        data["network_policy_controller_addresses"] = ["10.10.0.5"]
    groups["all"] = sorted(hosts)
    return {"groups": groups, "hosts": hosts}


def measure(model, rounds=ROUNDS):
    best = None
    for _round in range(rounds):
        start = time.perf_counter()
        problems = inventory_model.validate(model)
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    tracemalloc.start()
    inventory_model.validate(model)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return len(problems), best, peak


def big_listing(devices):
    """An IOMMU listing of about ``devices`` devices: per slot a GPU + audio in one group, and a bridge."""
    lines = []
    group = 0
    for slot in range(devices // 3):
        bus, dev = 1 + slot // 32, slot % 32
        lines.append("IOMMU Group %d:" % group)
        lines.append("\t%02x:%02x.0 PCI bridge [0604]: Vendor Bridge [1022:1483]" % (bus + 128, dev))
        group += 1
        lines.append("IOMMU Group %d:" % group)
        lines.append("\t%02x:%02x.0 VGA compatible controller [0300]: NVIDIA GA102 [10de:2204] (rev a1)" % (bus, dev))
        lines.append("\t%02x:%02x.1 Audio device [0403]: NVIDIA GA102 HD Audio [10de:1aef] (rev a1)" % (bus, dev))
        group += 1
    return sysfs_fixture.parse_listing("\n".join(lines))


def bench_sysfs(counts=SYSFS_DEVICES, rounds=ROUNDS):
    out = {}
    print("\n%-28s %7s %7s %12s %12s" % ("sysfs tree", "devices", "gpus", "best (ms)", "peak (KiB)"))
    for count in counts:
        with tempfile.TemporaryDirectory() as root:
            sysfs_fixture.build_tree(big_listing(count), {"defaults": {"numa_node": 0, "driver": "vfio-pci",
                                                                       "link": ["16.0 GT/s PCIe", 16,
                                                                                "16.0 GT/s PCIe", 16]}}, root)
            best = None
            for _round in range(rounds):
                start = time.perf_counter()
                facts = pci.read_tree(root)
                elapsed = time.perf_counter() - start
                best = elapsed if best is None else min(best, elapsed)
            tracemalloc.start()
            pci.read_tree(root)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        row = ("%d devices" % count, len(facts["devices"]), len(facts["gpus"]), best * 1000, peak / 1024)
        print("%-28s %7d %7d %12.1f %12.0f" % row)
        out[row[0]] = {"devices": row[1], "gpus": row[2], "best_ms": round(row[3], 3), "peak_kib": round(row[4])}
    return out


def bench_vllm_plan(rounds=ROUNDS):
    catalog = ["Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "mistralai/Mistral-7B-Instruct-v0.3",
               "Qwen/Qwen3-8B"]
    gpus = [{"index": i, "name": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920, "compute_capability": "8.0"}
            for i in range(8)]
    header = "\t" + "\t".join("GPU%d" % i for i in range(8)) + "\tCPU Affinity\tNUMA Affinity"

    def cell(i, j):
        return " X " if i == j else ("NV12" if i // 4 == j // 4 else "SYS")

    rows = [header] + ["GPU%d\t" % i + "\t".join(cell(i, j) for j in range(8)) + "\t0-63\t%d" % (i // 4)
                       for i in range(8)]
    topology = nvidia.parse_topology("\n".join(rows))
    cases = {
        "20 models / 8 GPUs": (gpus, topology, [{"name": "m%d" % i, "model": catalog[i % 4], "max_model_len": 4096,
                                                 "gpus": [i % 8], "gpu_memory_utilization": 0.3}
                                                for i in range(20)]),
        "8 models auto / 8 GPUs": (gpus, topology, [{"name": "a%d" % i, "model": catalog[i % 4]} for i in range(8)]),
        "4 TP=2 auto / 8 GPUs": (gpus, topology, [{"name": "t%d" % i, "model": "Qwen/QwQ-32B",
                                                   "max_model_len": 32768, "tensor_parallel_size": 2}
                                                  for i in range(4)]),
    }
    out = {}
    print("\n%-28s %7s %9s %12s %12s" % ("vllm_plan", "models", "services", "best (ms)", "peak (KiB)"))
    for label, (case_gpus, case_topology, models) in cases.items():
        best = None
        for _round in range(rounds):
            start = time.perf_counter()
            result = vllm_plan.plan(case_gpus, models, case_topology)
            elapsed = time.perf_counter() - start
            best = elapsed if best is None else min(best, elapsed)
        tracemalloc.start()
        vllm_plan.plan(case_gpus, models, case_topology)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print("%-28s %7d %9d %12.1f %12.0f" % (label, len(models), len(result["services"]), best * 1000, peak / 1024))
        out[label] = {"models": len(models), "services": len(result["services"]), "best_ms": round(best * 1000, 3),
                      "peak_kib": round(peak / 1024)}
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes, one round, results to a temporary directory (the tests run this)")
    parser.add_argument("--out", help="the results file (default bench/results/module-utils.json; with --smoke a "
                                      "temporary directory's)")
    args = parser.parse_args(argv)
    sites, sysfs_counts, rounds = (SITES[:2], (30,), 1) if args.smoke else (SITES, SYSFS_DEVICES, ROUNDS)
    results = {"smoke": args.smoke, "rounds": rounds, "cpus": os.cpu_count(), "machine": platform.platform(),
               "inventory": {}}
    print("%-28s %7s %9s %12s %12s" % ("case", "hosts", "problems", "best (ms)", "peak (KiB)"))
    for label, sizes in sites:
        model = site(*sizes)
        problems, best, peak = measure(model, rounds)
        print("%-28s %7d %9d %12.1f %12.0f" % (label, len(model["hosts"]), problems, best * 1000, peak / 1024))
        results["inventory"][label] = {"hosts": len(model["hosts"]), "problems": problems,
                                       "best_ms": round(best * 1000, 3), "peak_kib": round(peak / 1024)}
    results["sysfs"] = bench_sysfs(sysfs_counts, rounds)
    results["vllm_plan"] = bench_vllm_plan(rounds)
    out = args.out or os.path.join(tempfile.mkdtemp(prefix="bench-smoke-") if args.smoke
                                   else os.path.join(ROOT, "bench", "results"), "module-utils.json")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
    print("written to %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
