# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""containers.podman.podman with pipelining: the test harness's connection to its podman containers.

containers.podman's connection runs five `podman exec` per task (home directory, temp dir, chmod, the module, rm)
because it does not pass standard input to `podman exec` and so declares no pipelining. With `podman exec -i`,
Ansible pipes the module into the interpreter: one `podman exec` per task. On a 2-core CI machine that is most of
the time a molecule scenario or a lab run takes. Everything else (mount, put_file, fetch_file, options) is the
collection's own code. Enabled through ANSIBLE_CONNECTION_PLUGINS (Makefile) and ansible_connection:
podman_pipelined in the lab and molecule inventories; only for our own containers (DESIGN.md section 4).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: podman_pipelined
short_description: containers.podman.podman with pipelining (podman exec -i); the test harness's connection
description:
  - The containers.podman.podman connection, passing standard input to C(podman exec -i) so that Ansible can pipeline
    modules (one C(podman exec) per task instead of five).
author:
  - pvegpu.llmstack contributors (@pvegpu)
options:
  remote_addr:
    description: The ID or name of the container.
    default: inventory_hostname
    vars:
      - name: inventory_hostname
      - name: ansible_host
      - name: ansible_podman_host
  remote_user:
    description: The user in the container (its default when not given).
    vars:
      - name: ansible_user
    env:
      - name: ANSIBLE_REMOTE_USER
    ini:
      - section: defaults
        key: remote_user
    keyword:
      - name: remote_user
  podman_extra_args:
    description: Extra arguments for every podman command.
    default: ''
    ini:
      - section: defaults
        key: podman_extra_args
    vars:
      - name: ansible_podman_extra_args
    env:
      - name: ANSIBLE_PODMAN_EXTRA_ARGS
  podman_executable:
    description: The podman executable.
    default: podman
    vars:
      - name: ansible_podman_executable
    env:
      - name: ANSIBLE_PODMAN_EXECUTABLE
  pipelining:
    description: Pipe modules into the interpreter (on by default here).
    type: boolean
    default: true
    vars:
      - name: ansible_pipelining
"""

import shlex  # noqa: E402 (after DOCUMENTATION, as Ansible plugins are)

from ansible.module_utils.common.text.converters import to_native  # noqa: E402 (after DOCUMENTATION, as Ansible plugins are)
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection  # noqa: E402 (after DOCUMENTATION, as Ansible plugins are)


class Connection(PodmanConnection):
    transport = "podman_pipelined"
    has_pipelining = True

    def exec_command(self, cmd, in_data=None, sudoable=False):
        if in_data is None:
            return super(Connection, self).exec_command(cmd, in_data=in_data, sudoable=sudoable)
        if not self._connected:
            self._connect()
        cmd_args = shlex.split(to_native(cmd, errors="surrogate_or_strict"))
        args = ["exec", "-i"]
        if self.user:
            args.extend(("--user", self.user))
        return self._podman(args, cmd_args, in_data)
