"""Stand-in for nvidia-smi in the burnin role's tests (there is no GPU here; documented in molecule/burnin).

It knows the two calls the stage wrapper makes, for the GPUs that the gpu-burn output being replayed names
(/etc/llmstack-standin/burn.fixture, a recorded public gpu-burn run), so that gpu-burn's UUIDs and nvidia-smi's bus
ids agree as on a real VM:

- ``-q -x``: a minimal nvidia-smi XML (product name, UUID, bus id, PCIe replay counter); the counter grows by
  /etc/llmstack-standin/replay_step (default 0) on each call, so "before" and "after" differ by that much.
- ``--query-gpu=FIELDS --format=csv -l N``: the header, then one line per GPU every N seconds until killed. The
  values are synthetic, NOT recorded: the temperature is /etc/llmstack-standin/temperature (default 70) from the
  first sample on (a run of one sample is judged like a long one); the clocks_event_reasons.active bitmask is
  /etc/llmstack-standin/reasons (default 0x0) on every second sample, 0x0 otherwise.
"""
import datetime
import os
import re
import sys
import time

CONF = "/etc/llmstack-standin"
STATE = "/var/lib/llmstack-standin"


def setting(name, default):
    try:
        with open(os.path.join(CONF, name)) as handle:
            return handle.read().strip() or default
    except OSError:
        return default


def gpus():
    found = []
    with open(setting("burn.fixture", "/usr/share/llmstack-standin/gpu-burn-ok.txt")) as handle:
        for line in handle:
            match = re.match(r"^\s*GPU (\d+): (.+?) \(UUID: (GPU-[0-9A-Fa-f-]+)\)\s*$", line)
            if match:
                found.append((int(match.group(1)), match.group(2), match.group(3)))
    return found


def xml():
    os.makedirs(STATE, exist_ok=True)
    counter_file = os.path.join(STATE, "replays")
    try:
        with open(counter_file) as handle:
            counter = int(handle.read().strip() or 0)
    except OSError:
        counter = 0
    with open(counter_file, "w") as handle:
        handle.write("%d\n" % (counter + int(setting("replay_step", "0"))))
    parts = ['<?xml version="1.0" ?>', "<nvidia_smi_log>", "<driver_version>580.95.05</driver_version>",
             "<cuda_version>13.0</cuda_version>", "<attached_gpus>%d</attached_gpus>" % len(gpus())]
    for index, name, uuid in gpus():
        bus = "00000000:%02X:00.0" % (0x41 + 0x20 * index)
        parts += ['<gpu id="%s">' % bus, "<product_name>%s</product_name>" % name, "<uuid>%s</uuid>" % uuid,
                  "<pci><pci_bus_id>%s</pci_bus_id><replay_counter>%d</replay_counter></pci>" % (bus, counter),
                  "</gpu>"]
    print("\n".join(parts + ["</nvidia_smi_log>"]))


def value(field, index, name, uuid, step, reasons):
    target = float(setting("temperature", "70"))
    if field == "timestamp":
        return datetime.datetime.now().strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
    if field == "name":
        return name
    if field == "uuid":
        return uuid
    if field in ("gpu_bus_id", "pci.bus_id"):
        return "00000000:%02X:00.0" % (0x41 + 0x20 * index)
    if field == "index":
        return str(index)
    if field == "temperature.gpu":
        return "%d" % target
    if field.startswith("clocks_event_reasons.") or field.startswith("clocks_throttle_reasons."):
        return reasons if step % 2 else "0x0000000000000000"
    units = {"power.draw": "%.2f W" % (250 + 10 * index), "clocks.sm": "1695 MHz", "clocks.mem": "9751 MHz",
             "utilization.gpu": "100 %", "utilization.memory": "87 %", "memory.used": "20000 MiB",
             "memory.total": "24576 MiB", "pcie.link.gen.current": "4", "pcie.link.width.current": "16"}
    return units.get(field, "[N/A]")


def query(fields, interval):
    names = fields.split(",")
    print(", ".join(names), flush=True)
    reasons = setting("reasons", "0x0000000000000000")
    step = 0
    while True:
        for index, name, uuid in gpus():
            print(", ".join(value(f, index, name, uuid, step, reasons) for f in names), flush=True)
        if not interval:
            return
        step += 1
        time.sleep(interval)


def main(args):
    if "-q" in args and "-x" in args:
        return xml()
    fields = [a.split("=", 1)[1] for a in args if a.startswith("--query-gpu=")]
    if fields:
        interval = 0
        for i, arg in enumerate(args):
            if arg == "-l" and i + 1 < len(args):
                interval = int(args[i + 1])
            elif arg.startswith("--loop="):
                interval = int(arg.split("=", 1)[1])
        return query(fields[0], interval)
    sys.stderr.write("nvidia-smi stand-in: unsupported call %r\n" % (args,))
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]) or 0)
