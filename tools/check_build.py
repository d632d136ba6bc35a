# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build the collection into a temporary directory and fail on any warning or on unwanted content.

    python tools/check_build.py
"""

import os
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORBIDDEN = (".venv/", ".venv-litellm/", ".cache/", ".ansible/", "tests/output/", ".git/", "__pycache__/")


def main():
    with tempfile.TemporaryDirectory() as out:
        galaxy = os.path.join(os.path.dirname(sys.executable), "ansible-galaxy")
        result = subprocess.run([galaxy, "collection", "build", "--output-path", out, ROOT],
                                text=True, capture_output=True, check=False)
        text = result.stdout + result.stderr
        print(text.strip())
        if result.returncode != 0:
            return result.returncode
        if "WARNING" in text or "[WARNING]" in text:
            print("check_build: the build printed warnings", file=sys.stderr)
            return 1
        tarballs = [f for f in os.listdir(out) if f.endswith(".tar.gz")]
        with tarfile.open(os.path.join(out, tarballs[0])) as tar:
            names = tar.getnames()
        bad = [n for n in names if any(f in n + "/" for f in FORBIDDEN)]
        if bad:
            print("check_build: the tarball holds %s" % ", ".join(bad[:10]), file=sys.stderr)
            return 1
        needed = ["MANIFEST.json", "meta/runtime.yml", "plugins/action/inventory_check.py",
                  "roles/inventory_check/tasks/main.yml", "playbooks/site.yml"]
        missing = [n for n in needed if n not in names]
        if missing:
            print("check_build: the tarball lacks %s" % ", ".join(missing), file=sys.stderr)
            return 1
        print("check_build: %s, %d files, no warnings" % (tarballs[0], len(names)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
