# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate an inventory offline, exactly as the inventory_check role does, without connecting anywhere.

    python tools/check_inventory.py -i inventories/example -e vault_gpu_vm_api_token_secret=...

Loads the inventory with Ansible's own inventory and variable managers, gathers the model with the
inventory_check action's collect_model() and validates it with module_utils.inventory_model.
Exit status: 0 valid, 1 problems (printed one per line), 2 usage or loading error. Useful in CI of a
site repository, and safe for inventories whose hosts must not be contacted.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
COLLECTIONS = os.path.join(os.path.dirname(HERE), ".cache", "collections")


def _install_collection_loader():
    from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

    paths = [COLLECTIONS] + [p for p in os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep) if p]
    _AnsibleCollectionFinder(paths=paths)._install()


def load_model(sources, extra_vars=None, vault_password_files=(), ask_vault_pass=False):
    """The inventory model of these inventory sources (paths), as the action plugin builds it."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.hostvars import HostVars
    from ansible.vars.manager import VariableManager

    _install_collection_loader()  # after the imports above, which may install their own finder
    from ansible_collections.pvegpu.llmstack.plugins.action.inventory_check import collect_model

    loader = DataLoader()
    if vault_password_files or ask_vault_pass:
        from ansible.cli import CLI

        loader.set_vault_secrets(CLI.setup_vault_secrets(loader, vault_ids=[],
                                                         vault_password_files=list(vault_password_files),
                                                         ask_vault_pass=ask_vault_pass))
    inventory = InventoryManager(loader=loader, sources=list(sources))
    variables = VariableManager(loader=loader, inventory=inventory)
    variables._extra_vars = parse_extra_vars(loader, extra_vars or [])
    hostvars = HostVars(inventory=inventory, variable_manager=variables, loader=loader)
    return collect_model(inventory.get_groups_dict(), hostvars)


def check(sources, extra_vars=None, group_vlans=None, **vault):
    """(problems, model) for these inventory sources."""
    model = load_model(sources, extra_vars, **vault)
    from ansible_collections.pvegpu.llmstack.plugins.module_utils import inventory_model

    return inventory_model.validate(model, group_vlans), model


def parse_extra_vars(loader, items):
    """-e items as ansible-playbook reads them: @file (vault-aware), YAML/JSON, or key=value pairs."""
    from ansible.parsing.splitter import parse_kv

    result = {}
    for text in items:
        if text.startswith("@"):
            data = loader.load_from_file(text[1:])
        elif text.lstrip()[:1] in ("{", "["):
            data = loader.load(text)
        else:
            data = parse_kv(text)
        if not isinstance(data, dict):
            raise ValueError("extra vars %r are not a mapping" % text)
        result.update(data)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("-i", "--inventory", action="append", required=True, help="inventory source (repeatable)")
    parser.add_argument("-e", "--extra-vars", action="append", default=[],
                        help="key=value, JSON or @file (repeatable)")
    parser.add_argument("--vault-password-file", action="append", default=[], help="as ansible-playbook's")
    parser.add_argument("--ask-vault-pass", action="store_true", help="as ansible-playbook's")
    parser.add_argument("--json", action="store_true", help="print the problems as JSON")
    args = parser.parse_args(argv)
    try:
        problems, model = check(args.inventory, args.extra_vars, vault_password_files=args.vault_password_file,
                                ask_vault_pass=args.ask_vault_pass)
    except Exception as exc:  # an unreadable inventory: say so, briefly
        print("check_inventory: cannot load %s: %s" % (", ".join(args.inventory), exc), file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([p.as_dict() for p in problems], indent=2))
    elif problems:
        for problem in problems:
            print("- %s" % problem)
    else:
        print("The inventory of %d host(s) is valid" % len(model["hosts"]))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
