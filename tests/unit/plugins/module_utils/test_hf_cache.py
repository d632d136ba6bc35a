"""hf_cache: when a model's download is complete in the Hugging Face cache (the vllm_model_download module).

The layout is huggingface_hub's (blobs named by etag, snapshots linking to them); the real `hf download` fills it in
tests/integration/test_model_download.py. Here the cache is built by hand in a temp dir."""

import hashlib
import json
import os

from ansible_collections.pvegpu.llmstack.plugins.module_utils import hf_cache

COMMIT = "a" * 40
WEIGHTS = b"w" * 3000
CONFIG = b'{"model_type": "llama"}'
TREE = [
    {"type": "directory", "path": "original", "oid": "x", "size": 0},
    {"type": "file", "path": "config.json", "oid": "c0ffee", "size": len(CONFIG)},
    {"type": "file", "path": "model.safetensors", "oid": "1234", "size": 134,
     "lfs": {"oid": hashlib.sha256(WEIGHTS).hexdigest(), "size": len(WEIGHTS), "pointerSize": 134}},
    {"type": "file", "path": "consolidated.safetensors", "oid": "5678", "size": 134,
     "lfs": {"oid": "f" * 64, "size": 99, "pointerSize": 134}},
    {"type": "file", "path": "original/params.json", "oid": "9abc", "size": 10},
]


def cache(tmp_path, files, commit=COMMIT, shared=False):
    """A repository folder as huggingface_hub leaves it: each file a blob named by its etag, linked from the
    snapshot (relatively, ../../blobs/<etag>), refs/main naming the commit. ``shared``: huggingface_hub 2.x's shared
    blob store, where the repository's blob is itself a link to hub/blobs/<2 hex>/<xet hash>."""
    folder = tmp_path / "hub" / "models--org--tiny"
    (folder / "blobs").mkdir(parents=True, exist_ok=True)
    (folder / "refs").mkdir(exist_ok=True)
    (folder / "refs" / "main").write_text(commit)
    for path, (data, etag) in files.items():
        blob = folder / "blobs" / etag
        if shared:
            xet = hashlib.sha256(b"xet" + data).hexdigest()
            store = tmp_path / "hub" / "blobs" / xet[:2]
            store.mkdir(parents=True, exist_ok=True)
            (store / xet).write_bytes(data)
            blob.symlink_to(os.path.relpath(store / xet, blob.parent))
        else:
            blob.write_bytes(data)
        link = folder / "snapshots" / commit / path
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    return str(folder)


def test_the_expected_files_are_the_trees_files_with_lfs_sizes_less_the_excluded():
    files = hf_cache.expected_files(TREE, ["*consolidated*", "original/"])
    assert files == {"config.json": {"size": len(CONFIG), "sha256": None},
                     "model.safetensors": {"size": 3000, "sha256": hashlib.sha256(WEIGHTS).hexdigest()}}
    assert "original/params.json" in hf_cache.expected_files(TREE, ["*consolidated*"])


def test_the_repository_folder_is_named_as_huggingface_hub_names_it(tmp_path):
    assert hf_cache.repo_folder("/data/hf", "Qwen/Qwen2.5-7B-Instruct") == \
        "/data/hf/hub/models--Qwen--Qwen2.5-7B-Instruct"


def test_a_complete_cache_passes_and_each_defect_is_named(tmp_path):
    sha = hashlib.sha256(WEIGHTS).hexdigest()
    expected = hf_cache.expected_files(TREE, ["*consolidated*", "original/"])
    folder = cache(tmp_path, {"config.json": (CONFIG, "c0ffee"), "model.safetensors": (WEIGHTS, sha)})
    assert hf_cache.check(folder, COMMIT, expected) == {"complete": True, "missing": [], "wrong": []}
    # Another commit's snapshot does not count.
    assert hf_cache.check(folder, "b" * 40, expected)["missing"] == ["config.json", "model.safetensors"]
    # Cut short, or a blob that is not the Hub's file.
    os.truncate(os.path.join(folder, "blobs", sha), 100)
    result = hf_cache.check(folder, COMMIT, expected)
    assert not result["complete"] and result["wrong"] == ["model.safetensors: 100 bytes, the Hub says 3000"]
    other = cache(tmp_path / "other", {"config.json": (CONFIG, "c0ffee"), "model.safetensors": (WEIGHTS, "0" * 64)})
    assert hf_cache.check(other, COMMIT, expected)["wrong"] == [
        "model.safetensors: its blob is not the Hub's sha256 %s" % sha]


def test_a_blob_in_the_shared_xet_store_is_named_by_the_link_the_snapshot_holds(tmp_path):
    sha = hashlib.sha256(WEIGHTS).hexdigest()
    expected = hf_cache.expected_files(TREE, ["*consolidated*", "original/"])
    folder = cache(tmp_path, {"config.json": (CONFIG, "c0ffee"), "model.safetensors": (WEIGHTS, sha)}, shared=True)
    assert os.path.basename(os.path.realpath(os.path.join(folder, "blobs", sha))) != sha  # the chain goes on
    assert hf_cache.check(folder, COMMIT, expected) == {"complete": True, "missing": [], "wrong": []}


def test_partial_files_of_a_killed_download_are_found(tmp_path):
    folder = cache(tmp_path, {"config.json": (CONFIG, "c0ffee")})
    partial = os.path.join(folder, "blobs", "%s.1a2b3c4d.incomplete" % ("e" * 64))
    with open(partial, "wb") as handle:
        handle.write(b"x" * 42)
    assert hf_cache.leftovers(folder) == [(partial, 42)]
    assert hf_cache.leftovers(str(tmp_path / "nothing")) == []


def test_only_a_record_of_the_same_revision_and_excludes_with_its_files_there_is_complete(tmp_path):
    sha = hashlib.sha256(WEIGHTS).hexdigest()
    expected = hf_cache.expected_files(TREE, ["*consolidated*", "original/"])
    folder = cache(tmp_path, {"config.json": (CONFIG, "c0ffee"), "model.safetensors": (WEIGHTS, sha)})
    assert hf_cache.recorded_state(folder, "main", ["*consolidated*"])["complete"] is False  # no record yet
    with open(hf_cache.record_path(folder, "main"), "w") as handle:
        handle.write(hf_cache.record_text("main", COMMIT, expected, ["*consolidated*"]))
    assert hf_cache.recorded_state(folder, "main", ["*consolidated*"])["complete"] is True
    assert hf_cache.recorded_state(folder, "v2", ["*consolidated*"])["complete"] is False
    assert hf_cache.recorded_state(folder, "main", [])["complete"] is False
    # The branch moved on to a newer commit whose download was cut short: what refs/main serves is not complete.
    with open(os.path.join(folder, "refs", "main"), "w") as handle:
        handle.write("b" * 40)
    state = hf_cache.recorded_state(folder, "main", ["*consolidated*"])
    assert state["complete"] is False and state["wrong"] == ["refs/main: names %s, not the complete %s"
                                                             % ("b" * 40, COMMIT)]
    with open(os.path.join(folder, "refs", "main"), "w") as handle:
        handle.write(COMMIT)
    os.unlink(os.path.join(folder, "snapshots", COMMIT, "config.json"))
    state = hf_cache.recorded_state(folder, "main", ["*consolidated*"])
    assert state["complete"] is False and state["missing"] == ["config.json"]
    # A torn or foreign record is no record.
    with open(hf_cache.record_path(folder, "main"), "w") as handle:
        handle.write(json.dumps({"version": 99})[:5])
    assert hf_cache.read_record(folder, "main") is None


def test_a_commit_revision_needs_no_ref_and_a_partial_file_has_the_lock_of_its_blob(tmp_path):
    assert hf_cache.ref_commit(str(tmp_path), COMMIT) == COMMIT
    assert hf_cache.ref_commit(str(tmp_path), "main") is None
    assert hf_cache.record_path("/c/models--o--m", "release/v1") == \
        "/c/models--o--m/.llmstack-download.release%2Fv1.json"
    assert hf_cache.lock_path("/c/hub/models--o--m", "/c/hub/models--o--m/blobs/%s.1a2b3c4d.incomplete" % ("e" * 64)) \
        == "/c/hub/.locks/models--o--m/%s.lock" % ("e" * 64)
