"""Make the checkout importable as ansible_collections.pvegpu.llmstack (make setup links it)."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
if os.path.isdir(COLLECTIONS) and COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)

TOOLS = os.path.join(ROOT, "tools")
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def sysfs_trees(tmp_path_factory):
    """Every fixture of tests/fixtures/sysfs built into a sysfs tree: {name: root}."""
    import sysfs_fixture

    base = tmp_path_factory.mktemp("sysfs")
    return dict((name, sysfs_fixture.build_fixture(os.path.join(sysfs_fixture.FIXTURES, name), str(base / name)))
                for name in sysfs_fixture.fixtures())


def role_settings(role, names):
    """{name: default} of ``<role>_<name>`` from roles/<role>/defaults/main.yml, the one place a role's defaults
    are stated: what the role passes to its module when the inventory sets nothing."""
    import yaml

    with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    return dict((name, defaults["%s_%s" % (role, name)]) for name in names)
