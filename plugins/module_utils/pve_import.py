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

The volume an import displaces is deleted only when it is this collection's (``displaced='auto'``): the VM carries
an image tag of ours (so the import needed ``replace``), or the caller names it in ``owned`` (the empty disk the
gpu_vm role allocated in the same run). Any other volume - a disk the collection did not put there - is kept as
``unusedN``; ``displaced='delete'`` frees it too, ``displaced='keep'`` keeps even ours.
"""

import re

from ansible_collections.pvegpu.llmstack.plugins.module_utils import model_disk

TAG_PREFIX = "llmstack-img-"
TAG_RE = re.compile(r"^%s[0-9a-f]{12}$" % re.escape(TAG_PREFIX))
DISK_RE = re.compile(r"^(scsi([0-9]|[12][0-9]|30)|virtio([0-9]|1[0-5])|sata[0-5])$")
STORAGE_RE = re.compile(r"^[a-z][a-z0-9_.-]*$")
SOURCE_RE = re.compile(r"^[a-z][a-z0-9_.-]*:(import|images)/[A-Za-z0-9_.+-]+\.(raw|qcow2|vmdk)$")
OPTIONS_RE = re.compile(r"^([a-z_-]+=[A-Za-z0-9_.:-]+)(,[a-z_-]+=[A-Za-z0-9_.:-]+)*$")
HEX_RE = re.compile(r"^[0-9a-f]{64}$")
UNUSED_RE = re.compile(r"^unused(\d+)$")
DISPLACED = ("auto", "keep", "delete")


def tag_for(digest):
    return TAG_PREFIX + digest[:12]


def split_tags(value):
    return [t for t in re.split(r"[;, ]+", str(value or "")) if t]


def check(disk, storage, source, options, digest):
    """Problems with the arguments (each naming the role variable), before any request."""
    problems = []
    if not DISK_RE.match(str(disk)):
        problems.append("guest_image_import_disk: %r is not a scsiN, virtioN or sataN drive" % (disk,))
    elif str(disk) == model_disk.DISK_KEY:
        problems.append("guest_image_import_disk: %s is the GPU VM's model disk (gpu_vm_model_disk_gib); the image "
                        "goes to the boot disk (scsi0)" % (disk,))
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


def volume_of(value):
    """The volume id of a drive value (``local-lvm:vm-120-disk-0,size=32G`` -> ``local-lvm:vm-120-disk-0``).

    None for no drive, ``none`` or a CD-ROM: PVE keeps no ``unusedN`` for those.
    """
    if not value:
        return None
    parts = str(value).split(",")
    if parts[0] in ("", "none") or "media=cdrom" in parts[1:]:
        return None
    return parts[0]


def next_unused(config):
    """The ``unusedN`` key PVE gives the next volume a drive lets go of: the lowest free N."""
    index = 0
    while "unused%d" % index in config:
        index += 1
    return "unused%d" % index


def plan(config, status, disk, storage, source, options, digest, replace=False, boot=True, policy="auto",
         owned=()):
    """What to do: {'action': 'none'|'import'|'boot', 'update': {...}, 'reason': str} or {'error': str}.

    ``config`` is the VM's current config (GET .../config), ``status`` its power state. ``policy`` (the module's
    ``displaced``) says what becomes of the volume the import displaces from ``disk``: ``auto`` deletes it only
    when it is ours (the VM carries an image tag of ours, or the volume is in ``owned``: volume ids or drive
    values the caller allocated and nothing has written since), ``keep`` never deletes it, ``delete`` always
    does. An import that displaces a volume says so in ``displaced``: {volume, key (the unusedN it becomes),
    action: keep|delete, ours}, and in ``warning`` when it keeps a volume that is not ours.
    """
    if policy not in DISPLACED:
        return {"error": "guest_image_import_displaced: %r is not one of %s" % (policy, ", ".join(DISPLACED))}
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
    result = {"action": "import", "update": update, "reason": reason, "replaced": config.get(disk)}
    old = volume_of(config.get(disk))
    if old:
        mine = bool(ours) or old in set(volume_of(v) for v in owned or ())
        delete = policy == "delete" or (policy == "auto" and mine)
        key = next_unused(config)
        result["displaced"] = {"volume": old, "key": key, "action": "delete" if delete else "keep", "ours": mine}
        if delete:
            result["reason"] += "; its volume %s is deleted" % old
        else:
            result["reason"] += "; its volume %s is kept as %s" % (old, key)
        if not delete and not mine:
            result["warning"] = (
                "the VM's %s holds %s, a disk this collection did not put there: it is kept as %s, not deleted "
                "(remove it in PVE, or set guest_image_import_displaced / displaced: delete to let the import free "
                "it)" % (disk, old, key))
    return result


def diff(config, decision):
    """{before, after} as text: the keys the update sets, and what becomes of the displaced volume."""
    keys = sorted(decision.get("update") or {})
    before = ["%s: %s" % (k, config.get(k, "")) for k in keys]
    after = ["%s: %s" % (k, decision["update"][k]) for k in keys]
    moved = decision.get("displaced")
    if moved and moved["action"] == "keep" and moved["key"]:
        before.append("%s: " % moved["key"])
        after.append("%s: %s" % (moved["key"], moved["volume"]))
    elif moved:
        before.append("volume %s: on its storage" % moved["volume"])
        after.append("volume %s: %s" % (moved["volume"], "deleted" if moved["action"] == "delete"
                                        else "on its storage, in no drive and no unusedN"))
    return {"before": "".join(line + "\n" for line in before), "after": "".join(line + "\n" for line in after)}


def displaced(config_after, old_value):
    """The unusedN key holding the volume the import displaced, or None."""
    old_volume = volume_of(old_value)
    if not old_volume:
        return None
    for key, value in sorted(config_after.items(), key=lambda item: _unused_index(item[0])):
        if UNUSED_RE.match(key) and volume_of(value) == old_volume:
            return key
    return None


def _unused_index(key):
    match = UNUSED_RE.match(key)
    return int(match.group(1)) if match else -1
