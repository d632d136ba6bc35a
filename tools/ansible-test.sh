#!/usr/bin/env bash
# Run ansible-test on this collection, offline.
#   tools/ansible-test.sh sanity|units [extra ansible-test arguments]
# ansible-test needs the collection at .../ansible_collections/pvegpu/llmstack (it resolves symlinks),
# so the tracked and untracked-but-not-ignored files are copied to a directory outside the checkout first.
# Its sanity venvs bootstrap pip with a get-pip script from a host we cannot reach; we give it a
# stand-in that installs pip from the pip wheel downloaded from PyPI (HARNESS.md, ansible-test).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
py=${PYTHON:-$root/.venv/bin/python}
pip_version=$("$py" - <<'PY'
from ansible_test._internal.python_requirements import get_venv_packages
class P:  # a PythonConfig stand-in: only .version is read
    version = "3.11"
print(get_venv_packages(P())["pip"])
PY
)
wheels=$root/.cache/wheels
cache=$HOME/.ansible/test/cache
standin=$cache/get_pip_${pip_version//./_}.py
mkdir -p "$wheels"
wheel=$(find "$wheels" -maxdepth 1 -name "pip-$pip_version-*.whl" | head -n 1)
if [ -z "$wheel" ]; then
  "$py" -m pip download -q --no-deps --only-binary=:all: -d "$wheels" "pip==$pip_version"
  wheel=$(find "$wheels" -maxdepth 1 -name "pip-$pip_version-*.whl" | head -n 1)
fi
mkdir -p "$cache"
cat >"$standin.tmp" <<PY
# Stand-in for ansible-test's get-pip script (written by pvegpu.llmstack tools/ansible-test.sh):
# installs pip from a local wheel instead of downloading get-pip.py.
import subprocess
import sys
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.exit(subprocess.call([sys.executable, "$wheel/pip", "install", "--no-index", "--find-links", "$wheels"] + args))
PY
mv "$standin.tmp" "$standin"

# Outside the checkout (inside it, ansible-test asks git, which ignores the copy) and without hidden
# path components (ansible-test skips those); one copy per checkout.
dest=${TMPDIR:-/tmp}/llmstack-ansible-test/$(printf '%s' "$root" | md5sum | cut -c1-8)/ansible_collections/pvegpu/llmstack
rm -rf "$dest"
mkdir -p "$dest"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [ -e "$f" ] && printf '%s\0' "$f"
done | tar -C "$root" --null -T - -cf - | tar -C "$dest" -xf -
# ansible-test finds the community collections in the venv's ansible package.
cd "$dest"
export PATH=$root/.venv/bin:$PATH
cmd=$1
shift
set +e
case "$cmd" in
  sanity) ansible-test sanity --python 3.11 --local --color no "$@" ;;
  units) ansible-test units --python 3.11 --local --color no "$@" ;;
  *) echo "usage: $0 sanity|units [args]" >&2; exit 2 ;;
esac
rc=$?
# Keep ansible-test's reports where the checkout's tools look for them.
if [ -d tests/output ]; then
  mkdir -p "$root/tests/output"
  cp -a tests/output/. "$root/tests/output/"
fi
exit $rc
