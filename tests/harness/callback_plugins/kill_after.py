# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A test harness device, not part of the collection: the run dies (SIGKILL, its whole process group) the moment a
named task has ended on a host - "killed after the config was written, before its handler ran", at exactly that
point instead of whenever a poller happens to see the file (kill-and-rerun tests, tests/integration/test_lab.py).
ansible-playbook must lead its own process group (the test starts it with start_new_session); otherwise only its
own process is killed."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import signal

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: kill_after
type: aggregate
short_description: SIGKILL the run right after a named task (test harness)
description:
  - When a task named E(LLMSTACK_KILL_AFTER_TASK) (a role's task with or without its role prefix) ends on a host
    (ok or changed, every loop item done), the run's process group is killed with SIGKILL.
  - E(LLMSTACK_KILL_AFTER_HOST), when set, limits it to that host.
requirements:
  - enabled in callbacks_enabled
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "kill_after"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self.task = os.environ.get("LLMSTACK_KILL_AFTER_TASK", "")
        self.host = os.environ.get("LLMSTACK_KILL_AFTER_HOST", "")

    def v2_runner_on_ok(self, result):
        name = result._task.get_name()
        if not self.task or (name != self.task and not name.endswith(": " + self.task)):
            return
        if self.host and result._host.get_name() != self.host:
            return
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpgrp(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
