# -*- coding: utf-8 -*-
# Copyright: pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Putting a built guest image on a PVE VM's disk: whether to import, and the config change that does it.

Plain Python, no Ansible imports. PVE imports a disk when a drive is set to ``<storage>:0,import-from=<volume>``:
it allocates a new volume of the source's size, copies the image into it, and the drive's previous volume
becomes ``unusedN``. An API token may import from a volume of an ``import`` (or images) storage, not from an
absolute path (that is root@pam's).

The VM carries a tag ``llmstack-img-<first 12 hex of the image digest>`` once an image was imported, which is
how a rerun knows there is nothing to do - and how it knows that the disk holds an installed guest that must
not be overwritten without ``replace``.
"""

import re

TAG_PREFIX = "llmstack-img-"
TAG_RE = re.compile(r"^%s[0-9a-f]{12}$" % re.escape(TAG_PREFIX))
DISK_RE = re.compile(r"^(scsi([0-9]|[12][0-9]|30)|virtio([0-9]|1[0-5])|sata[0-5])$")
STORAGE_RE = re.compile(r"^[a-z][a-z0-9_.-]*$")
SOURCE_RE = re.compile(r"^[a-z][a-z0-9_.-]*:(import|images)/[A-Za-z0-9_.+-]+\.(raw|qcow2|vmdk)$")
OPTIONS_RE = re.compile(r"^([a-z_-]+=[A-Za-z0-9_.:-]+)(,[a-z_-]+=[A-Za-z0-9_.:-]+)*$")
HEX_RE = re.compile(r"^[0-9a-f]{64}$")


def tag_for(digest):
    return TAG_PREFIX + digest[:12]


def split_tags(value):
    return [t for t in re.split(r"[;, ]+", str(value or "")) if t]


def check(disk, storage, source, options, digest):
    """Problems with the arguments (each naming the role variable), before any request."""
    problems = []
    if not DISK_RE.match(str(disk)):
        problems.append("guest_image_import_disk: %r is not a scsiN, virtioN or sataN drive" % (disk,))
    if not STORAGE_RE.match(str(storage)):
        problems.append("guest_image_import_target_storage: %r is not a PVE storage id" % (storage,))
    if not SOURCE_RE.match(str(source)):
        problems.append("guest_image_import_storage: the source %r must be <storage>:import/<file>.raw (a volume "
                        "an API token may import from)" % (source,))
    if options and not OPTIONS_RE.match(str(options)):
        problems.append("gpu_vm_disk_options: %r is not key=value[,key=value...]" % (options,))
    if not HEX_RE.match(str(digest)):
        problems.append("digest: %r is not the image's SHA-256" % (digest,))
    return problems


def plan(config, status, disk, storage, source, options, digest, replace=False, boot=True):
    """What to do: {'action': 'none'|'import'|'boot', 'update': {...}, 'reason': str} or {'error': str}.

    ``config`` is the VM's current config (GET .../config), ``status`` its power state.
    """
    tags = split_tags(config.get("tags"))
    ours = [t for t in tags if TAG_RE.match(t)]
    want_tag = tag_for(digest)
    boot_value = "order=%s" % disk
    current_boot = str(config.get("boot") or "")
    boot_ok = not boot or current_boot.startswith("order=%s" % disk) and current_boot.split("=", 1)[1].split(";")[0] \
        == disk
    if want_tag in ours and disk in config:
        if boot_ok:
            return {"action": "none", "update": {}, "reason": "the VM's %s holds this image" % disk}
        return {"action": "boot", "update": {"boot": boot_value},
                "reason": "the boot order does not start at %s" % disk}
    if ours and not replace:
        return {"error": "the VM's %s holds another image (%s) and may have been changed since: set "
                         "guest_image_import_replace to overwrite it (its data is lost)" % (disk, ", ".join(ours))}
    if status == "running":
        return {"error": "the VM is running: stop it before its %s is replaced by the image" % disk}
    value = "%s:0,import-from=%s" % (storage, source)
    if options:
        value += "," + options
    new_tags = [t for t in tags if not TAG_RE.match(t)] + [want_tag]
    update = {disk: value, "tags": ";".join(sorted(new_tags))}
    if boot:
        update["boot"] = boot_value
    reason = "the VM's %s has no image yet" % disk if not ours else "replacing image %s" % ", ".join(ours)
    return {"action": "import", "update": update, "reason": reason, "replaced": config.get(disk)}


def displaced(config_after, old_value):
    """The unusedN key holding the volume the import displaced (to delete), or None."""
    if not old_value:
        return None
    old_volume = str(old_value).split(",", 1)[0]
    for key, value in sorted(config_after.items()):
        if re.match(r"^unused\d+$", key) and str(value).split(",", 1)[0] == old_volume:
            return key
    return None
