"""Build a stand-in for NVIDIA's container toolkit apt repository (molecule nvidia scenario, tests).

NVIDIA's repository (nvidia.github.io/libnvidia-container) is not reachable from this machine, and no Debian
package ships the toolkit. This builds a flat repository laid out as NVIDIA's (stable/deb/<arch>/ with Packages
and a clear-signed InRelease) holding **stand-in packages** with the real package names, versions and
dependencies, signed by a throwaway ed25519 key generated per build (its armored public key is written as
``gpgkey``, as NVIDIA publishes it, and its fingerprint to ``fingerprint``). The real parts are apt's: signature
check through ``signed-by``, $(ARCH), version pinning and holds.

The stand-in ``nvidia-ctk`` implements only ``runtime configure --runtime=docker [--config=PATH]`` as NVIDIA
documents it (adds ``runtimes.nvidia = {"args": [], "path": "nvidia-container-runtime"}`` to daemon.json, keeps
every other key) and records each call in /var/log/llmstack-stubs.log.

    python3 tools/nvidia_repo_double.py OUT_DIR [--versions 1.18.2-1 1.18.3-1]
"""

import argparse
import hashlib
import os
import shutil
import subprocess
import tempfile
import time

PACKAGES = {
    "libnvidia-container1": ([], {}),
    "libnvidia-container-tools": (["libnvidia-container1 (= {v})"], {"usr/bin/nvidia-container-cli": "cli"}),
    "nvidia-container-toolkit-base": ([], {"usr/bin/nvidia-ctk": "ctk", "usr/bin/nvidia-container-runtime": "rt"}),
    "nvidia-container-toolkit": (["nvidia-container-toolkit-base (= {v})", "libnvidia-container-tools (= {v})"],
                                 {"usr/bin/nvidia-container-runtime-hook": "hook"}),
}

CTK = r'''#!/usr/bin/python3
"""Stand-in for nvidia-ctk {version} (pvegpu.llmstack tests): runtime configure --runtime=docker only."""
import json, os, sys
with open("/var/log/llmstack-stubs.log", "a") as log:
    log.write("nvidia-ctk %s\n" % " ".join(sys.argv[1:]))
args = sys.argv[1:]
if args[:1] == ["--version"]:
    print("NVIDIA Container Toolkit CLI version {version} (stand-in)")
    sys.exit(0)
if args[:2] != ["runtime", "configure"] or "--runtime=docker" not in args:
    sys.stderr.write("stand-in nvidia-ctk: only 'runtime configure --runtime=docker' is implemented\n")
    sys.exit(2)
path = "/etc/docker/daemon.json"
for arg in args:
    if arg.startswith("--config="):
        path = arg.split("=", 1)[1]
config = {}
if os.path.exists(path) and open(path).read().strip():
    config = json.load(open(path))
config.setdefault("runtimes", {})["nvidia"] = {"args": [], "path": "nvidia-container-runtime"}
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path, "w") as handle:
    handle.write(json.dumps(config, indent=4) + "\n")
print("INFO Wrote updated config to %s" % path)
'''

STUB = "#!/bin/sh\n# Stand-in for {name} {version} (pvegpu.llmstack tests).\necho \"{name} stand-in\"\n"


def build_deb(work, out, name, version, depends, files):
    root = os.path.join(work, "%s_%s" % (name, version))
    os.makedirs(os.path.join(root, "DEBIAN"))
    control = ["Package: %s" % name, "Version: %s" % version, "Architecture: amd64",
               "Maintainer: pvegpu.llmstack tests <tests@invalid>", "Section: utils", "Priority: optional",
               "Description: stand-in for NVIDIA's %s (tests only)" % name]
    if depends:
        control.insert(3, "Depends: %s" % ", ".join(d.format(v=version) for d in depends))
    with open(os.path.join(root, "DEBIAN", "control"), "w") as handle:
        handle.write("\n".join(control) + "\n")
    for path, kind in files.items():
        target = os.path.join(root, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as handle:
            handle.write(CTK.replace("{version}", version) if kind == "ctk"
                         else STUB.format(name=os.path.basename(path), version=version))
        os.chmod(target, 0o755)
    deb = os.path.join(out, "%s_%s_amd64.deb" % (name, version))
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", root, deb], check=True,
                   stdout=subprocess.DEVNULL)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("out")
    parser.add_argument("--versions", nargs="+", default=["1.18.2-1", "1.18.3-1"])
    args = parser.parse_args()
    out = os.path.abspath(args.out)
    shutil.rmtree(out, ignore_errors=True)
    arch_dir = os.path.join(out, "stable", "deb", "amd64")
    os.makedirs(arch_dir)
    work = tempfile.mkdtemp(prefix="nvidia-repo-")
    gnupg = os.path.join(work, "gnupg")
    os.makedirs(gnupg, 0o700)
    env = dict(os.environ, GNUPGHOME=gnupg)
    try:
        for version in args.versions:
            for name, (depends, files) in PACKAGES.items():
                build_deb(work, arch_dir, name, version, depends, files)
        packages = subprocess.run(["dpkg-scanpackages", "-m", "."], cwd=arch_dir, check=True,
                                  capture_output=True).stdout
        with open(os.path.join(arch_dir, "Packages"), "wb") as handle:
            handle.write(packages)
        date = time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime())
        release = ("Origin: pvegpu.llmstack tests\nLabel: nvidia-container-toolkit stand-in\nArchitectures: amd64\n"
                   "Date: %s\nSHA256:\n %s %d Packages\n" % (date, hashlib.sha256(packages).hexdigest(),
                                                             len(packages)))
        with open(os.path.join(arch_dir, "Release"), "w") as handle:
            handle.write(release)
        uid = "llmstack test repository <tests@invalid>"
        subprocess.run(["gpg", "--batch", "--quiet", "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign",
                        "never"], env=env, check=True)
        subprocess.run(["gpg", "--batch", "--quiet", "--yes", "--clearsign", "-o", os.path.join(arch_dir, "InRelease"),
                        os.path.join(arch_dir, "Release")], env=env, check=True)
        subprocess.run(["gpg", "--batch", "--quiet", "--yes", "--armor", "--export", "-o",
                        os.path.join(out, "gpgkey"), uid], env=env, check=True)
        listing = subprocess.run(["gpg", "--batch", "--with-colons", "--fingerprint", uid], env=env, check=True,
                                 capture_output=True, text=True).stdout
        fingerprint = [line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:")][0]
        with open(os.path.join(out, "fingerprint"), "w") as handle:
            handle.write(fingerprint + "\n")
    finally:
        subprocess.run(["gpgconf", "--kill", "all"], env=env, check=False)
        shutil.rmtree(work, ignore_errors=True)
    for base, dirs, files in os.walk(out):
        for name in dirs:
            os.chmod(os.path.join(base, name), 0o755)
        for name in files:
            os.chmod(os.path.join(base, name), 0o644)
    os.chmod(out, 0o755)


if __name__ == "__main__":
    main()
