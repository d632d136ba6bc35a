"""Stand-in for NVIDIA's container runtime hook in the lab (no GPU here).

Docker offers its "nvidia" device driver (compose: deploy.resources.reservations.devices) when this program is on
PATH, and runs it as an OCI prestart hook of every container that asks for GPUs. The real hook mounts the driver
and the GPUs; this one records which GPUs the container asked for (NVIDIA_VISIBLE_DEVICES in its config) in
/run/llmstack-lab/gpu-requests.log and changes nothing.
"""
import json
import os
import sys
import time

state = json.load(sys.stdin) if len(sys.argv) > 1 and sys.argv[1] == "prestart" else {}
devices = "none"
try:
    with open(os.path.join(state.get("bundle", ""), "config.json")) as handle:
        for item in json.load(handle).get("process", {}).get("env", []):
            if item.startswith("NVIDIA_VISIBLE_DEVICES="):
                devices = item.split("=", 1)[1]
except (OSError, ValueError):
    pass
os.makedirs("/run/llmstack-lab", exist_ok=True)
with open("/run/llmstack-lab/gpu-requests.log", "a") as log:
    log.write("%d %s %s\n" % (time.time(), state.get("id", "?"), devices))
