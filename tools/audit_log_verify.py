# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verify an audit log written by the pvegpu.llmstack.audit_log callback, without Ansible.

    python3 tools/audit_log_verify.py FILE [--anchor HASH] [--json]

Exit 0 when the chain holds, 1 when it is broken (the first broken line and why), 2 when the file cannot be
read or the arguments are wrong. Needs only Python 3.6+ and the collection's plugins/module_utils/audit_log.py
(found next to this script, in a checkout or an installed collection). docs/awx.md.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "plugins", "module_utils"))

import audit_log  # noqa: E402  (plain Python, no Ansible imports)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Walk the hash chain of a pvegpu.llmstack audit log and report "
                                                 "the first broken line.")
    parser.add_argument("path", help="the audit log (JSON lines)")
    parser.add_argument("--anchor", help="a record hash known from elsewhere (the syslog copy) that must be in "
                                         "the chain")
    parser.add_argument("--json", action="store_true", help="print the whole report as JSON")
    args = parser.parse_args(argv)
    try:
        report = audit_log.verify_file(args.path, anchor=args.anchor)
    except (audit_log.AuditLogError, ValueError) as err:
        print("ERROR: %s" % err, file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2, sort_keys=True) if args.json else audit_log.describe(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
