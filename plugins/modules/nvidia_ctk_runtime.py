#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: nvidia_ctk_runtime
short_description: Register the NVIDIA runtime with Docker through nvidia-ctk, only when it is missing
version_added: 0.1.0
description:
  - Reads Docker's O(path) first; when its C(runtimes) already hold O(name) pointing at C(nvidia-container-runtime)
    nothing runs. Otherwise runs C(nvidia-ctk runtime configure --runtime=docker --config=PATH) (seed 000), reads the
    file again and fails unless the runtime is there exactly once.
  - Check mode runs nothing and predicts a change when the runtime is missing (also when C(nvidia-ctk) is not
    installed yet).
  - Restarting Docker is left to the caller (a handler), so it happens once.
extends_documentation_fragment:
  - pvegpu.llmstack.attributes
  - pvegpu.llmstack.attributes.host
options:
  path:
    description: Docker's daemon configuration file.
    type: path
    default: /etc/docker/daemon.json
  name:
    description: The runtime name.
    type: str
    default: nvidia
  nvidia_ctk:
    description: The nvidia-ctk command (a name in C(PATH) or a path).
    type: str
    default: nvidia-ctk
author:
  - pvegpu.llmstack contributors (@pvegpu)
"""

EXAMPLES = r"""
- name: Add the nvidia runtime to Docker (once)
  pvegpu.llmstack.nvidia_ctk_runtime:
  notify: Restart Docker
"""

RETURN = r"""
runtime:
  description: The runtime entry after the run (C(path), C(args)); empty in check mode when it was missing.
  returned: always
  type: dict
  sample: {path: nvidia-container-runtime, args: []}
command:
  description: The nvidia-ctk command that ran.
  returned: when it ran
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.pvegpu.llmstack.plugins.module_utils import docker_engine, nvidia_guest


def read(path):
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        return handle.read()


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/etc/docker/daemon.json"),
            name=dict(type="str", default="nvidia"),
            nvidia_ctk=dict(type="str", default="nvidia-ctk"),
        ),
        supports_check_mode=True,
    )
    path, name = module.params["path"], module.params["name"]
    try:
        text = read(path)
        entry = nvidia_guest.nvidia_runtime(docker_engine.load_daemon_json(text, path), name)
    except (docker_engine.DockerEngineError, nvidia_guest.NvidiaGuestError) as exc:
        module.fail_json(msg=str(exc))
    if entry is not None:
        module.exit_json(changed=False, runtime=entry, path=path)
    if module.check_mode:
        module.exit_json(changed=True, runtime={}, path=path)
    ctk = module.get_bin_path(module.params["nvidia_ctk"]) or (
        module.params["nvidia_ctk"] if os.path.isabs(module.params["nvidia_ctk"]) else None)
    if not ctk or not os.path.exists(ctk):
        module.fail_json(msg="nvidia_ctk: %s is not installed (package nvidia-container-toolkit-base)"
                         % module.params["nvidia_ctk"])
    command = [ctk, "runtime", "configure", "--runtime=docker", "--config=%s" % path]
    if name != "nvidia":
        command.append("--nvidia-runtime-name=%s" % name)
    rc, out, err = module.run_command(command)
    if rc != 0:
        module.fail_json(msg="%s failed (rc %d): %s" % (" ".join(command), rc, (err or out).strip()), command=command)
    text = read(path)
    try:
        entry = nvidia_guest.nvidia_runtime(docker_engine.load_daemon_json(text, path), name)
        count = nvidia_guest.runtime_entries(text, name)
    except (docker_engine.DockerEngineError, nvidia_guest.NvidiaGuestError) as exc:
        module.fail_json(msg="after nvidia-ctk: %s" % exc, command=command)
    if entry is None or count != 1:
        module.fail_json(msg="after %s, %s declares the %s runtime %d time(s), not once with "
                         "nvidia-container-runtime" % (" ".join(command), path, name, count), command=command)
    module.exit_json(changed=True, runtime=entry, command=command, path=path, stdout=out)


if __name__ == "__main__":
    main()
