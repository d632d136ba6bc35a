"""tools/lab.py's Docker image cache: which images it holds, and how a new Docker host's data root is seeded from it
(the layers as hard links, the image store copied, only into an empty data root on the same file system). podman is
not called: the cache's location is given to the functions through monkeypatch (a test double for `podman volume`)."""

import os

import lab


def make_cache(root):
    cache = root / "cache"
    layer = cache / "overlay2" / "abc123" / "diff" / "usr" / "bin"
    layer.mkdir(parents=True)
    (layer / "python3").write_bytes(b"\x7fELF" + b"x" * 4096)
    (cache / "overlay2" / "l").mkdir()
    os.symlink("../abc123/diff", str(cache / "overlay2" / "l" / "SHORTID"))
    (cache / "image" / "overlay2").mkdir(parents=True)
    (cache / "image" / "overlay2" / "repositories.json").write_text('{"Repositories": {}}')
    (cache / "complete").write_text("localhost/llmstack-lab-vllm-cpu:0.32.0\n")
    return cache


def test_a_new_data_root_gets_the_layers_as_hard_links_and_its_own_image_store(tmp_path, monkeypatch):
    cache = make_cache(tmp_path)
    monkeypatch.setattr(lab, "cached_docker_root", lambda: str(cache))
    data = tmp_path / "docker" / "llmstack-lab-gpu-a"
    data.mkdir(parents=True)
    lab.seed_docker_data(str(data))
    source = cache / "overlay2" / "abc123" / "diff" / "usr" / "bin" / "python3"
    seeded = data / "overlay2" / "abc123" / "diff" / "usr" / "bin" / "python3"
    assert os.stat(seeded).st_ino == os.stat(source).st_ino  # a hard link, not a copy
    assert os.readlink(str(data / "overlay2" / "l" / "SHORTID")) == "../abc123/diff"
    store = data / "image" / "overlay2" / "repositories.json"
    assert store.read_text() == '{"Repositories": {}}'
    assert os.stat(store).st_ino != os.stat(cache / "image" / "overlay2" / "repositories.json").st_ino  # its own
    assert sorted(os.listdir(data)) == ["image", "overlay2"]  # no marker, nothing else of the cache


def test_a_data_root_in_use_or_no_cache_is_left_alone(tmp_path, monkeypatch):
    cache = make_cache(tmp_path)
    data = tmp_path / "docker" / "host"
    (data / "containers").mkdir(parents=True)
    monkeypatch.setattr(lab, "cached_docker_root", lambda: str(cache))
    lab.seed_docker_data(str(data))
    assert os.listdir(data) == ["containers"]
    empty = tmp_path / "docker" / "other"
    empty.mkdir()
    monkeypatch.setattr(lab, "cached_docker_root", lambda: None)
    lab.seed_docker_data(str(empty))
    assert os.listdir(empty) == []


def test_the_cache_holds_every_service_image_of_the_docker_hosts_and_only_those():
    hostvars = {
        "lab-gpu-a": {"llmstack_lab_docker": True, "vllm_image": "localhost/llmstack-lab-vllm-standin:0.1",
                      "vllm_models": [{"name": "fast", "image": "localhost/llmstack-lab-vllm-cpu:0.32.0"}],
                      "llmstack_lab_vllm_runtime": "localhost/llmstack-lab-vllm-cpu:0.32.0"},
        "lab-gpu-b": {"llmstack_lab_docker": True,
                      "llmstack_lab_vllm_runtime": "localhost/llmstack-lab-vllm-cpu:0.32.0",
                      "monitoring_node_exporter_image": "localhost/llmstack-lab-node-exporter:debian13"},
        "lab-client": {"vllm_image": "localhost/llmstack-lab-unused:1"},  # no Docker: not loaded anywhere
        "lab-gateway": {"llmstack_lab_docker": True, "litellm_image": "ghcr.io/berriai/litellm:main-v1.0"},
    }
    assert lab.docker_images(hostvars) == ["localhost/llmstack-lab-node-exporter:debian13",
                                           "localhost/llmstack-lab-vllm-cpu:0.32.0",
                                           "localhost/llmstack-lab-vllm-standin:0.1"]
