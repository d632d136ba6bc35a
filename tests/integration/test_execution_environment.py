"""The execution environment: `make ee` (the collection tarball + `ansible-builder create`) and what the image
build would do with the context, as far as it runs without a registry.

Building the image itself needs a container engine that can pull quay.io/centos/centos:stream10 and reach
Galaxy and PyPI from inside the build: not possible here. What is run for real: ansible-builder 3 writing the
context, ansible-galaxy installing the collection from the context's tarball, and the context's own
introspect.py (the script the image build runs) collecting the Python and system requirements from the
installed collection's meta/execution-environment.yml.
"""

import ast
import os
import re
import subprocess
import sys

import pytest
import yaml
from conftest import BIN, ROOT, ansible_env


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    base = tmp_path_factory.mktemp("ee")
    target = base / "context"
    result = subprocess.run(["make", "-s", "ee", "EE_CONTEXT=%s" % target], cwd=ROOT, env=ansible_env(), text=True,
                            capture_output=True, check=False, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {"base": base, "dir": target, "build": target / "_build"}


def read(path):
    with open(path) as handle:
        return handle.read()


def requirement_names(path):
    names = []
    for line in read(path).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(re.split(r"[<>=!~ \[]", line, maxsplit=1)[0].lower())
    return names


def test_the_containerfile_pins_what_the_tests_run(context):
    text = (context["dir"] / "Containerfile").read_text()
    core = [line for line in read(os.path.join(ROOT, "requirements.txt")).splitlines()
            if line.startswith("ansible-core==")][0]
    assert 'ARG ANSIBLE_INSTALL_REFS="%s ansible-runner==' % core in text
    ee = yaml.safe_load(read(os.path.join(ROOT, "execution-environment.yml")))
    assert ee["version"] == 3
    assert 'ARG EE_BASE_IMAGE="%s"' % ee["images"]["base_image"]["name"] in text
    assert "ansible-galaxy collection install" in text and "introspect.py introspect" in text


def test_the_galaxy_requirements_carry_the_collection_and_its_dependencies(context):
    requirements = yaml.safe_load((context["build"] / "requirements.yml").read_text())["collections"]
    names = {entry["name"] for entry in requirements}
    galaxy = yaml.safe_load(read(os.path.join(ROOT, "galaxy.yml")))
    assert set(galaxy["dependencies"]) <= names
    local = [entry for entry in requirements if entry.get("type") == "file"]
    assert len(local) == 1
    # The Containerfile copies _build/ to /build: the tarball the requirements name is in the context.
    assert local[0]["name"] == "/build/" + "collections/pvegpu-llmstack.tar.gz"
    assert (context["build"] / "collections" / "pvegpu-llmstack.tar.gz").stat().st_size > 10000


def test_the_image_build_would_find_the_collections_requirements(context):
    """ansible-galaxy installs the tarball from the context; the context's introspect.py (run in the image's
    builder stage) reads the collection's meta/execution-environment.yml."""
    collections = context["base"] / "collections"
    result = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--no-deps", "--force", "-p",
                             str(collections), str(context["build"] / "collections" / "pvegpu-llmstack.tar.gz")],
                            env=ansible_env(), text=True, capture_output=True, check=False, timeout=300)
    assert result.returncode == 0, result.stderr
    installed = collections / "ansible_collections" / "pvegpu" / "llmstack"
    for path in ("plugins/callback/audit_log.py", "plugins/modules/audit_log_verify.py",
                 "meta/execution-environment.yml", "meta/ee-requirements.txt", "meta/ee-bindep.txt"):
        assert (installed / path).is_file(), path
    assert not (installed / ".cache").exists() and not (installed / ".venv").exists()
    pip_out, bindep_out = context["base"] / "pip.txt", context["base"] / "bindep.txt"
    result = subprocess.run([sys.executable, str(context["build"] / "scripts" / "introspect.py"), "introspect",
                             str(collections), "--user-pip", str(context["build"] / "requirements.txt"),
                             "--user-bindep", str(context["build"] / "bindep.txt"), "--write-pip", str(pip_out),
                             "--write-bindep", str(bindep_out)], text=True, capture_output=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    pip = pip_out.read_text()
    for package in requirement_names(os.path.join(ROOT, "meta", "ee-requirements.txt")):
        assert re.search(r"^%s\b.*# from collection pvegpu\.llmstack" % package, pip, re.M | re.I), pip
    assert "ansible-pylibssh" in pip and "ansible-core" not in pip
    bindep = bindep_out.read_text()
    assert re.search(r"^openssh-client \[platform:dpkg\].*# from collection pvegpu\.llmstack", bindep, re.M), bindep
    assert "rsync" in bindep


def test_every_third_party_import_of_the_plugins_is_an_ee_requirement():
    """A plugin that imports a package the EE does not install would fail only inside AWX."""
    declared = set(requirement_names(os.path.join(ROOT, "meta", "ee-requirements.txt")))
    imported = {}
    for folder, _dirs, files in os.walk(os.path.join(ROOT, "plugins")):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            for node in ast.walk(ast.parse(read(path))):
                if isinstance(node, ast.Import):
                    tops = [alias.name.split(".")[0] for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    tops = [node.module.split(".")[0]]
                else:
                    continue
                for top in tops:
                    if top in sys.stdlib_module_names or top in ("ansible", "ansible_collections", "__future__"):
                        continue
                    imported.setdefault(top, path)
    assert imported, "no third-party import found: the scan is broken"
    missing = {top: path for top, path in imported.items() if top.lower() not in declared}
    assert not missing, "imported but not in meta/ee-requirements.txt: %s" % missing
