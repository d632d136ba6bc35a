"""module_utils.secret_files: a secret file is read back; only a missing one is generated; an existing one is never
overwritten; anything unreadable fails naming the file, before any file is written."""

import errno
import os
import re
import stat

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import secret_files
from ansible_collections.pvegpu.llmstack.plugins.module_utils.secret_files import SecretFileError

SPECS = [{"name": "master_key", "prefix": "sk-"}, {"name": "encryption_key", "format": "hex", "length": 64},
         {"name": "project_public_key", "format": "uuid", "prefix": "pk-lf-"}, {"name": "password", "length": 32}]


def mode(path):
    return stat.S_IMODE(os.stat(str(path)).st_mode)


def test_missing_files_are_generated_0600_in_a_new_0700_directory_and_read_back_unchanged(tmp_path):
    directory = tmp_path / "secrets"
    first = secret_files.ensure(str(directory), SPECS)
    assert first["changed"] and first["missing"] == first["generated"] == first["written"] == [s["name"] for s in SPECS]
    values = first["secrets"]
    assert re.match(r"^sk-[A-Za-z0-9]{48}$", values["master_key"])
    assert re.match(r"^[0-9a-f]{64}$", values["encryption_key"])
    assert re.match(r"^pk-lf-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
                    values["project_public_key"])
    assert re.match(r"^[A-Za-z0-9]{32}$", values["password"])
    assert mode(directory) == 0o700
    for spec in SPECS:
        path = directory / spec["name"]
        assert mode(path) == 0o600 and path.read_text() == values[spec["name"]] + "\n"
    assert sorted(os.listdir(str(directory))) == sorted(s["name"] for s in SPECS)  # no temporary file left
    second = secret_files.ensure(str(directory), SPECS)
    assert not second["changed"] and second["secrets"] == values
    assert second["missing"] == second["generated"] == second["written"] == []


def test_two_generated_secrets_differ():
    assert secret_files.generate({"name": "a"}) != secret_files.generate({"name": "a"})


def test_an_existing_secret_is_kept_and_only_the_missing_one_is_generated(tmp_path):
    (tmp_path / "master_key").write_text("sk-kept-from-an-earlier-run\n")
    os.chmod(str(tmp_path / "master_key"), 0o600)
    result = secret_files.ensure(str(tmp_path), SPECS[:2])
    assert result["secrets"]["master_key"] == "sk-kept-from-an-earlier-run"
    assert result["generated"] == ["encryption_key"] and result["missing"] == ["encryption_key"]
    assert (tmp_path / "master_key").read_text() == "sk-kept-from-an-earlier-run\n"


def test_a_given_value_is_written_when_missing_and_a_different_existing_file_is_refused_not_overwritten(tmp_path):
    spec = {"name": "master_key", "value": "sk-from-the-first-gateway", "source": "gateway gw1"}
    result = secret_files.ensure(str(tmp_path), [spec])
    assert result["written"] == ["master_key"] and result["generated"] == []
    assert (tmp_path / "master_key").read_text() == "sk-from-the-first-gateway\n"
    assert not secret_files.ensure(str(tmp_path), [spec])["changed"]
    with pytest.raises(SecretFileError) as failure:
        secret_files.ensure(str(tmp_path), [dict(spec, value="sk-another-value-entirely")])
    assert str(tmp_path / "master_key") in str(failure.value) and "gateway gw1" in str(failure.value)
    assert "sk-" not in str(failure.value).replace(str(tmp_path), "")  # no value in the message
    assert (tmp_path / "master_key").read_text() == "sk-from-the-first-gateway\n"


def test_check_mode_generates_in_memory_and_writes_nothing(tmp_path):
    directory = tmp_path / "secrets"
    result = secret_files.ensure(str(directory), SPECS, check_mode=True)
    assert result["changed"] and result["generated"] == [s["name"] for s in SPECS]
    assert re.match(r"^sk-[A-Za-z0-9]{48}$", result["secrets"]["master_key"])
    assert not directory.exists()


def test_read_only_lists_the_missing_and_creates_nothing(tmp_path):
    (tmp_path / "api_key").write_text("k" * 40 + "\n")
    os.chmod(str(tmp_path / "api_key"), 0o600)
    result = secret_files.ensure(str(tmp_path), [{"name": "api_key"}, {"name": "other"}], create=False)
    assert result == {"secrets": {"api_key": "k" * 40}, "missing": ["other"], "generated": [], "written": [],
                      "modes_fixed": [], "changed": False}
    assert not (tmp_path / "other").exists()
    assert secret_files.ensure(str(tmp_path / "nowhere"), [{"name": "api_key"}], create=False)["missing"] == ["api_key"]


def test_an_existing_file_not_0600_is_set_to_0600(tmp_path):
    (tmp_path / "master_key").write_text("sk-kept-from-an-earlier-run\n")
    os.chmod(str(tmp_path / "master_key"), 0o644)
    assert secret_files.ensure(str(tmp_path), SPECS[:1], check_mode=True)["modes_fixed"] == ["master_key"]
    assert mode(tmp_path / "master_key") == 0o644
    result = secret_files.ensure(str(tmp_path), SPECS[:1])
    assert result["changed"] and result["modes_fixed"] == ["master_key"] and mode(tmp_path / "master_key") == 0o600


def unreadable_cases():
    def directory(path):
        os.mkdir(str(path))

    def dangling(path):
        os.symlink(str(path) + ".gone", str(path))

    def empty(path):
        path.write_text("\n")

    def binary(path):
        path.write_bytes(b"\xff\xfe\x00secret")

    def fifo(path):
        os.mkfifo(str(path))

    return [("a directory", directory, "is a directory"), ("a dangling link", dangling, "symbolic link"),
            ("empty", empty, "is empty"), ("not text", binary, "not UTF-8"), ("a FIFO", fifo, "not a regular file")]


@pytest.mark.parametrize("label,make,fragment", unreadable_cases(), ids=[c[0] for c in unreadable_cases()])
def test_an_unreadable_secret_fails_naming_it_and_nothing_is_written(tmp_path, label, make, fragment):
    make(tmp_path / "salt_key")
    specs = [{"name": "master_key"}, {"name": "salt_key"}, {"name": "postgres_password"}]
    with pytest.raises(SecretFileError) as failure:
        secret_files.ensure(str(tmp_path), specs)
    assert str(tmp_path / "salt_key") in str(failure.value) and fragment in str(failure.value)
    assert not (tmp_path / "master_key").exists() and not (tmp_path / "postgres_password").exists()


def test_a_secrets_path_that_is_a_file_fails_instead_of_counting_as_missing(tmp_path):
    (tmp_path / "secrets").write_text("not a directory\n")
    with pytest.raises(SecretFileError) as failure:
        secret_files.ensure(str(tmp_path / "secrets"), [{"name": "api_key"}])
    assert str(tmp_path / "secrets" / "api_key") in str(failure.value) and "Not a directory" in str(failure.value)


@pytest.mark.parametrize("code", [errno.EACCES, errno.EIO, errno.EPERM])
def test_an_open_or_read_error_fails_naming_the_file(tmp_path, monkeypatch, code):
    (tmp_path / "master_key").write_text("sk-kept\n")
    real_open = os.open

    def failing_open(path, *args, **kwargs):
        if str(path).endswith("master_key"):
            raise OSError(code, os.strerror(code), str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(secret_files.os, "open", failing_open)
    with pytest.raises(SecretFileError) as failure:
        secret_files.ensure(str(tmp_path), [{"name": "master_key"}, {"name": "salt_key"}])
    assert str(tmp_path / "master_key") in str(failure.value) and os.strerror(code) in str(failure.value)
    assert not (tmp_path / "salt_key").exists()


def test_an_io_error_while_reading_fails_naming_the_file(tmp_path, monkeypatch):
    (tmp_path / "master_key").write_text("sk-kept\n")

    def failing_read(handle, size):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(secret_files.os, "read", failing_read)
    with pytest.raises(SecretFileError) as failure:
        secret_files.read(str(tmp_path / "master_key"))
    assert str(tmp_path / "master_key") in str(failure.value) and "Input/output error" in str(failure.value)


def test_a_file_the_user_may_not_read_fails_for_real(tmp_path):
    """Not a stand-in: a file mode 000. Root reads every file, so as root a forked child drops to nobody first."""
    path = tmp_path / "master_key"
    path.write_text("sk-kept\n")
    os.chmod(str(path), 0o000)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 0
        try:
            os.close(read_end)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            try:
                specs = [{"name": "master_key"}, {"name": "salt_key"}]
                message = "OK %r" % (secret_files.ensure(str(tmp_path), specs),)
            except SecretFileError as exc:
                message = "ERROR %s" % exc
            os.write(write_end, message.encode())
        except BaseException:  # noqa: BLE001 (report anything to the parent through the exit status)
            status = 1
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        out = pipe.read()
    assert os.waitpid(pid, 0)[1] == 0
    assert out.startswith("ERROR"), out
    assert str(path) in out and "Permission denied" in out
    assert not (tmp_path / "salt_key").exists()


def test_a_file_that_appears_meanwhile_is_not_overwritten(tmp_path, monkeypatch):
    real_link = os.link

    def racing_link(src, dst):
        with open(dst, "w") as handle:
            handle.write("sk-written-by-someone-else\n")
        return real_link(src, dst)

    monkeypatch.setattr(secret_files.os, "link", racing_link)
    with pytest.raises(SecretFileError) as failure:
        secret_files.ensure(str(tmp_path), [{"name": "master_key"}])
    assert "appeared while it was being written" in str(failure.value)
    assert (tmp_path / "master_key").read_text() == "sk-written-by-someone-else\n"
    assert os.listdir(str(tmp_path)) == ["master_key"]


@pytest.mark.parametrize("spec,fragment", [
    ({"name": "../etc/passwd"}, "plain file name"),
    ({"name": ".hidden"}, "plain file name"),
    ({"name": "k", "format": "base64"}, "format"),
    ({"name": "k", "length": 8}, "length"),
    ({"name": "k", "prefix": "sk -"}, "prefix"),
    ({"name": "k", "value": " padded "}, "white space"),
    ({"name": "k", "value": ""}, "empty"),
])
def test_bad_specs_are_refused(tmp_path, spec, fragment):
    with pytest.raises(SecretFileError) as failure:
        secret_files.ensure(str(tmp_path), [spec])
    assert fragment in str(failure.value)
    assert os.listdir(str(tmp_path)) == []


def test_a_name_given_twice_is_refused(tmp_path):
    with pytest.raises(SecretFileError, match="given twice: k"):
        secret_files.ensure(str(tmp_path), [{"name": "k"}, {"name": "k"}])
