"""The vllm role's model disk (issue #33 item 4) on a real block device: a loop device over a sparse file, given to a
privileged container from localhost/llmstack-debian13, named as udev names the disk PVE attaches as scsi1 (a symlink
in /dev/disk/by-id, as in a VM). The role's own task files run as present.yml runs them
(find_model_disk.yml, then model_disk.yml): check mode predicts and formats nothing; the run makes ext4, mounts it
at /data/llm/models with nofail in fstab and points the Hugging Face cache there; a rerun changes nothing and keeps
the files; a grown disk (gpu_vm resizes it when the models grow) is grown in the guest, where the kernel allows an
online resize (this sandbox's refuses it: that test says so and skips); required without the disk stops before
anything changes. Nothing is stood in for but the disk's origin (a loop device, not PVE's)."""

import contextlib
import json
import subprocess
import uuid

import pytest
from conftest import ansible_env, parse_json_report, playbook, tasks_run

pytestmark = pytest.mark.slow
IMAGE = "localhost/llmstack-debian13"
BY_ID = "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_drive-scsi1"
GIB = 1024 ** 3


def sh(*cmd, check=True):
    result = subprocess.run(list(cmd), env=ansible_env(), text=True, capture_output=True, check=False)
    assert not check or result.returncode == 0, (cmd, result.stdout, result.stderr)
    return result


@contextlib.contextmanager
def gpu_vm(path, size="1G", prepare=""):
    """A privileged container with a loop device of ``size`` as its model disk (the host's /dev is a privileged
    container's, the loop device included, and mount works there), under udev's name for the disk PVE attaches as
    scsi1 (virtio-scsi, QEMU's drive-scsi1 serial): a symlink. ``prepare``: a shell command run in it first."""
    backing = path / "disk.img"
    sh("truncate", "-s", size, str(backing))
    loop = sh("losetup", "--find", "--show", str(backing)).stdout.strip()
    name = "llmstack-test-model-disk-" + uuid.uuid4().hex[:8]
    try:
        sh("podman", "run", "-d", "--name", name, "--privileged", "--label", "io.llmstack.test=1", IMAGE,
           "sleep", "infinity")
        sh("podman", "exec", name, "sh", "-c", "mkdir -p /dev/disk/by-id && ln -s ../../%s %s%s"
           % (loop.rsplit("/", 1)[1], BY_ID, " && " + prepare if prepare else ""))
        (path / "hosts.yml").write_text(json.dumps({"all": {"hosts": {"gpu-vm": {
            "ansible_host": name, "ansible_connection": "podman_pipelined",
            "ansible_python_interpreter": "/usr/bin/python3"}}}}))
        yield {"name": name, "loop": loop, "backing": backing, "path": path}
    finally:
        sh("podman", "rm", "-f", "-t", "0", name, check=False)
        sh("losetup", "-d", loop, check=False)


@pytest.fixture(scope="module")
def vm(tmp_path_factory):
    with gpu_vm(tmp_path_factory.mktemp("model-disk")) as made:
        yield made


def run(vm, *extra, check_rc=True, **variables):
    """find_model_disk.yml then model_disk.yml (when found), as the role's validate and present.yml run them."""
    play = [{"hosts": "gpu-vm", "gather_facts": False,
             "vars": dict({"vllm_models": [{"name": "fast", "model": "meta-llama/Llama-3.1-8B-Instruct"}]},
                          **variables),
             "tasks": [
                 {"ansible.builtin.include_role": {"name": "pvegpu.llmstack.vllm",
                                                   "tasks_from": "find_model_disk.yml", "public": True}},
                 {"ansible.builtin.include_role": {"name": "pvegpu.llmstack.vllm", "tasks_from": "model_disk.yml"},
                  "when": "vllm_model_disk_in_use | bool"},
                 {"name": "Report", "ansible.builtin.debug": {"msg": "{{ vllm_hf_home }}"}}]}]
    (vm["path"] / "play.yml").write_text(json.dumps(play))
    rc, out, err = playbook(str(vm["path"] / "play.yml"), "-i", str(vm["path"] / "hosts.yml"), *extra,
                            json_output=True)
    assert not check_rc or rc == 0, out[-4000:] + err[-2000:]
    report = parse_json_report(out)
    runs = tasks_run(report)
    home = [r["hosts"]["gpu-vm"].get("msg") for r in runs if r["task"] == "Report"]
    return rc, report, runs, (home[0] if home else None)


def inside(vm, *cmd, check=True):
    return sh("podman", "exec", vm["name"], *cmd, check=check)


def test_the_model_disk_is_formatted_mounted_kept_and_grown(vm):
    rc, report, _runs, home = run(vm, "--check")
    assert report["stats"]["gpu-vm"]["changed"] > 0
    assert inside(vm, "blkid", vm["loop"], check=False).stdout == ""       # check mode formatted nothing
    assert home == "/data/llm/models/hf-cache"

    _rc, report, _runs, home = run(vm)
    assert report["stats"]["gpu-vm"]["changed"] > 0 and home == "/data/llm/models/hf-cache"
    assert 'TYPE="ext4"' in inside(vm, "blkid", vm["loop"]).stdout
    source, fstype = inside(vm, "findmnt", "-n", "-o", "SOURCE,FSTYPE", "/data/llm/models").stdout.split()
    assert fstype == "ext4" and source == vm["loop"]
    fstab = [line.split() for line in inside(vm, "cat", "/etc/fstab").stdout.splitlines() if BY_ID in line]
    assert len(fstab) == 1 and fstab[0][1] == "/data/llm/models" and "nofail" in fstab[0][3].split(",")
    inside(vm, "sh", "-c", "mkdir -p /data/llm/models/hf-cache && echo kept > /data/llm/models/hf-cache/marker")

    _rc, report, _runs, _home = run(vm)
    assert report["stats"]["gpu-vm"]["changed"] == 0
    assert inside(vm, "cat", "/data/llm/models/hf-cache/marker").stdout == "kept\n"


def online_resize_refused(tmp_path):
    """Whether this machine's kernel refuses an online ext4 grow (EXT4_IOC_RESIZE_FS): this sandbox's does, for root
    too, so the grow below can only run where a VM's kernel would allow it."""
    image = tmp_path / "probe.img"
    sh("truncate", "-s", "64M", str(image))
    loop = sh("losetup", "--find", "--show", str(image)).stdout.strip()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        sh("mkfs.ext4", "-q", loop)
        sh("mount", loop, str(mnt))
        try:
            sh("truncate", "-s", "128M", str(image))
            sh("losetup", "-c", loop)
            return "Permission denied" in sh("resize2fs", loop, check=False).stderr
        finally:
            sh("umount", str(mnt))
    finally:
        sh("losetup", "-d", loop, check=False)


def test_a_grown_disk_is_grown_in_the_guest(vm, tmp_path):
    """gpu_vm grows the disk when the models grow (auto, grow-only); the guest's file system follows online."""
    if online_resize_refused(tmp_path):
        pytest.skip("this machine's kernel refuses online ext4 resizing (resize2fs: Permission denied), for root "
                    "on the host too")
    run(vm)

    def size():
        return int(inside(vm, "df", "-B1", "--output=size", "/data/llm/models").stdout.split()[1])

    before = size()
    sh("truncate", "-s", "2G", str(vm["backing"]))
    sh("losetup", "-c", vm["loop"])
    _rc, report, _runs, _home = run(vm)
    assert report["stats"]["gpu-vm"]["changed"] > 0
    assert size() > before + GIB / 2
    assert inside(vm, "cat", "/data/llm/models/hf-cache/marker").stdout == "kept\n"
    assert run(vm)[1]["stats"]["gpu-vm"]["changed"] == 0


def test_local_models_under_the_mount_point_stop_the_first_mount(tmp_path):
    """A local model directory under /data/llm/models on the root disk would be hidden by the mount: refused while the
    disk is not mounted yet, naming the model (a fresh disk of its own: the module's VM has its disk mounted)."""
    with gpu_vm(tmp_path, size="256M", prepare="mkdir -p /data/llm/models/mine") as vm:
        rc, report, runs, _home = run(vm, check_rc=False, vllm_models=[
            {"name": "fast", "model": "meta-llama/Llama-3.1-8B-Instruct"},
            {"name": "mine", "model": "/data/llm/models/mine"}])
        assert rc != 0
        failed = [r for r in runs if r["hosts"]["gpu-vm"].get("failed")]
        assert len(failed) == 1 and failed[0]["task"].endswith("would hide local model directories"), failed
        assert failed[0]["hosts"]["gpu-vm"]["msg"].startswith("vllm_models: /data/llm/models/mine is under "
                                                              "vllm_model_disk_mount (/data/llm/models)")
        assert report["stats"]["gpu-vm"]["changed"] == 0
        assert inside(vm, "blkid", vm["loop"], check=False).stdout == ""


def test_required_without_the_disk_stops_before_anything_changes(vm):
    rc, report, runs, home = run(vm, check_rc=False, vllm_model_disk="required",
                                 vllm_model_disk_device="/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_drive-scsi9")
    assert rc != 0
    failed = [r for r in runs if r["hosts"]["gpu-vm"].get("failed")]
    assert len(failed) == 1 and failed[0]["task"].endswith("Stop when the model disk is required and missing")
    assert failed[0]["hosts"]["gpu-vm"]["msg"].startswith("vllm_model_disk: required, and /dev/disk/by-id/"
                                                          "scsi-0QEMU_QEMU_HARDDISK_drive-scsi9")
    assert report["stats"]["gpu-vm"]["changed"] == 0


def test_auto_without_the_disk_and_none_keep_the_cache_under_vllm_dir(vm):
    for variables in ({"vllm_model_disk_device": "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_drive-scsi9"},
                      {"vllm_model_disk": "none"}):
        _rc, report, _runs, home = run(vm, vllm_dir="/opt/llm-inference", **variables)
        assert home == "/opt/llm-inference/hf-cache", variables
        assert report["stats"]["gpu-vm"]["changed"] == 0
