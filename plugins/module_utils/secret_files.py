# -*- coding: utf-8 -*-
# Copyright: pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Secrets kept in files on the target: read back on every run, generated only when the file does not exist.

The rules (docs/architecture.md, "Secrets"):
- a file that exists is the secret; it is never overwritten, whatever is asked;
- only a file that does not exist (ENOENT) is generated (or written with the value the caller gives);
- any other failure - permissions, an I/O error, a directory or a FIFO in its place, a dangling symbolic link, an
  empty or undecodable file - raises SecretFileError naming the file, and nothing is written (every file is read
  before any is written);
- a new file is written 0600 in a 0700 directory, complete or not at all: written to a temporary file in the same
  directory, then hard-linked to its name, which fails if the name exists (no race overwrites a secret).
Plain Python: no Ansible import; the secret_file module is a thin wrapper.
"""

import contextlib
import errno
import os
import secrets
import stat
import string
import tempfile
import uuid

FORMATS = ("alnum", "hex", "uuid")
ALNUM = string.ascii_letters + string.digits
MAX_BYTES = 65536
MIN_LENGTH = 16


class SecretFileError(Exception):
    """A secret file that cannot be read, checked or written; the message names the file."""


def check_spec(spec):
    """The spec with its defaults, or SecretFileError: {name, format, length, prefix, value, source}."""
    name = spec.get("name")
    if not isinstance(name, str) or not name or "/" in name or name.startswith(".") or "\0" in name:
        raise SecretFileError("secret name %r: must be a plain file name (no '/', not starting with '.')" % (name,))
    fmt = spec.get("format") or "alnum"
    if fmt not in FORMATS:
        raise SecretFileError("secret %s: format %r is not one of %s" % (name, fmt, ", ".join(FORMATS)))
    length = spec.get("length")
    length = 48 if length is None else length
    if isinstance(length, bool) or not isinstance(length, int) or length < MIN_LENGTH or length > 4096:
        raise SecretFileError("secret %s: length %r must be a whole number from %d to 4096"
                              % (name, length, MIN_LENGTH))
    prefix = spec.get("prefix") or ""
    if any(c.isspace() for c in prefix):
        raise SecretFileError("secret %s: prefix %r must not contain white space" % (name, prefix))
    value = spec.get("value")
    if value is not None and (not isinstance(value, str) or not value.strip() or value != value.strip()
                              or "\n" in value):
        raise SecretFileError("secret %s: the value given is empty or has white space around or in it" % name)
    return {"name": name, "format": fmt, "length": length, "prefix": prefix, "value": value,
            "source": spec.get("source") or ""}


def generate(spec):
    """A fresh secret: prefix + `length` random letters and digits, or hex digits, or a random UUID."""
    spec = check_spec(spec)
    if spec["format"] == "uuid":
        body = str(uuid.UUID(bytes=secrets.token_bytes(16), version=4))
    elif spec["format"] == "hex":
        body = secrets.token_hex((spec["length"] + 1) // 2)[:spec["length"]]
    else:
        body = "".join(secrets.choice(ALNUM) for _index in range(spec["length"]))
    return spec["prefix"] + body


def read(path):
    """(value, mode) of the secret at `path`, or (None, None) when it does not exist. Trailing white space
    (the newline) is not part of the value. Anything but a readable, non-empty regular file raises."""
    try:
        # O_NONBLOCK: a FIFO in the file's place must not hang the run.
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            if os.path.lexists(path):
                raise SecretFileError("the secret %s is a symbolic link to a file that does not exist: it is not "
                                      "generated through a link; remove the link (a new secret is then generated) "
                                      "or restore its target" % path)
            return None, None
        raise SecretFileError("cannot read the secret %s: %s. Only a missing file is generated and an existing one "
                              "is never overwritten: fix it (permissions, disk) and run again"
                              % (path, exc.strerror or exc))
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise SecretFileError("the secret %s is %s: move it away (a new secret is then generated) or put the "
                                  "secret's file there" % (path, kind))
        chunks, size = [], 0
        while True:
            chunk = os.read(handle, MAX_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_BYTES:
                raise SecretFileError("the secret %s is larger than %d bytes: not a secret this collection wrote"
                                      % (path, MAX_BYTES))
    except OSError as exc:
        raise SecretFileError("cannot read the secret %s: %s. Only a missing file is generated and an existing one "
                              "is never overwritten: fix it (permissions, disk) and run again"
                              % (path, exc.strerror or exc))
    finally:
        os.close(handle)
    try:
        value = b"".join(chunks).decode("utf-8").strip()
    except UnicodeDecodeError:
        raise SecretFileError("the secret %s is not UTF-8 text: not a secret this collection wrote" % path)
    if not value:
        raise SecretFileError("the secret %s is empty: it is not replaced on its own; delete it to have a new one "
                              "generated (services that use the old one must then be given the new one)" % path)
    return value, stat.S_IMODE(info.st_mode)


def _fsync_dir(directory):
    try:
        handle = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def write_new(path, value):
    """Write `value` + newline to `path`, which must not exist, 0600; the directory is created 0700 when missing.
    The file appears complete or not at all; an existing file (even one that appeared meanwhile) is never replaced."""
    directory = os.path.dirname(path) or "."
    try:
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o700)
            os.chmod(directory, 0o700)
        handle, tmp = tempfile.mkstemp(dir=directory, prefix=".secret-")  # 0600
    except OSError as exc:
        raise SecretFileError("cannot write the secret %s: %s" % (path, exc.strerror or exc))
    try:
        try:
            os.fchmod(handle, 0o600)
            data = (value + "\n").encode("utf-8")
            while data:
                data = data[os.write(handle, data):]
            os.fsync(handle)
        finally:
            os.close(handle)
        try:
            os.link(tmp, path)
        except OSError as exc:
            if exc.errno == errno.EEXIST:
                raise SecretFileError("the secret %s appeared while it was being written (another run?): it is not "
                                      "overwritten; run again" % path)
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            # A file system without hard links: create the name exclusively instead.
            exclusive = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            try:
                data = (value + "\n").encode("utf-8")
                while data:
                    data = data[os.write(exclusive, data):]
                os.fsync(exclusive)
            finally:
                os.close(exclusive)
    except SecretFileError:
        raise
    except OSError as exc:
        raise SecretFileError("cannot write the secret %s: %s" % (path, exc.strerror or exc))
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    _fsync_dir(directory)


def ensure(directory, specs, create=True, check_mode=False):
    """Read every secret of `specs` under `directory`; with `create`, write the missing ones (the spec's `value`,
    or a generated one). Returns {secrets: {name: value}, missing, generated, written, modes_fixed, changed}.

    Every file is read before any is written, so an unreadable one stops the whole set unchanged. An existing file
    whose value differs from a given `value` raises (it is never overwritten). In check mode nothing is written;
    a value that would be generated is generated anyway (so templates can be rendered) but never stored, and a
    later real run generates another. Files not 0600 are set to 0600 (reported in modes_fixed)."""
    checked = [check_spec(spec) for spec in specs]
    names = [spec["name"] for spec in checked]
    duplicates = sorted(set(n for n in names if names.count(n) > 1))
    if duplicates:
        raise SecretFileError("secret names given twice: %s" % ", ".join(duplicates))
    result = {"secrets": {}, "missing": [], "generated": [], "written": [], "modes_fixed": [], "changed": False}
    found = {}
    for spec in checked:
        path = os.path.join(directory, spec["name"])
        value, mode = read(path)
        found[spec["name"]] = (value, mode)
        if value is None:
            result["missing"].append(spec["name"])
            continue
        if spec["value"] is not None and value != spec["value"]:
            raise SecretFileError(
                "the secret %s holds another value than %s: an existing secret is never overwritten. Make them "
                "agree: delete the file to have it replaced (then restart what uses it), or give the file's value"
                % (path, spec["source"] or "the one given"))
        result["secrets"][spec["name"]] = value
    for spec in checked:
        path = os.path.join(directory, spec["name"])
        value, mode = found[spec["name"]]
        if value is not None:
            if mode != 0o600:
                result["modes_fixed"].append(spec["name"])
                if not check_mode:
                    try:
                        os.chmod(path, 0o600)
                    except OSError as exc:
                        raise SecretFileError("cannot set the secret %s to mode 0600: %s"
                                              % (path, exc.strerror or exc))
            continue
        if not create:
            continue
        new = spec["value"] if spec["value"] is not None else generate(spec)
        if spec["value"] is None:
            result["generated"].append(spec["name"])
        result["written"].append(spec["name"])
        if not check_mode:
            write_new(path, new)
        result["secrets"][spec["name"]] = new
    result["changed"] = bool(result["written"] or result["modes_fixed"])
    return result
