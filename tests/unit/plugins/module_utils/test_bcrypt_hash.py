"""bcrypt_hash: the hashes of the monitoring web password (exporter toolkit web.yml). Checked with the bcrypt package
and, where Python still has it, independently with the C library's crypt(3) (libxcrypt knows $2b$)."""

import sys
import warnings

import pytest
from ansible_collections.pvegpu.llmstack.plugins.module_utils import bcrypt_hash

PASSWORD = "Zq3vT9xLw2mB7nK4pR8sD1fG6hJ0cV5a"


def crypt_or_skip():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import crypt
        except ImportError:
            pytest.skip("no crypt module in this Python")
    if not (crypt.crypt("x", "$2b$04$" + "." * 22) or "").startswith("$2b$"):
        pytest.skip("this C library's crypt(3) has no bcrypt")
    return crypt


def test_a_new_hash_verifies_the_password_and_not_another():
    hashed = bcrypt_hash.new_hash(PASSWORD)
    assert hashed.startswith("$2b$12$") and len(hashed) == 60 and PASSWORD not in hashed
    assert bcrypt_hash.cost(hashed) == 12
    assert bcrypt_hash.verifies(PASSWORD, hashed)
    assert not bcrypt_hash.verifies(PASSWORD + "x", hashed)
    assert not bcrypt_hash.verifies(PASSWORD[:-1], hashed)


def test_the_c_library_agrees():
    crypt = crypt_or_skip()
    hashed = bcrypt_hash.new_hash(PASSWORD, rounds=4)
    assert crypt.crypt(PASSWORD, hashed) == hashed
    assert crypt.crypt(PASSWORD + "x", hashed) != hashed
    # and a hash made by crypt(3) verifies here
    theirs = crypt.crypt(PASSWORD, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 4))
    assert bcrypt_hash.verifies(PASSWORD, theirs)


def test_the_salt_is_random_and_not_derived_from_the_password():
    first, second = bcrypt_hash.new_hash(PASSWORD, rounds=4), bcrypt_hash.new_hash(PASSWORD, rounds=4)
    assert first != second and first[:29] != second[:29]


def test_the_same_password_keeps_its_earlier_hash_so_a_rerun_writes_the_same_file():
    earlier = bcrypt_hash.new_hash(PASSWORD)
    assert bcrypt_hash.keep_or_hash(PASSWORD, [earlier]) == earlier
    assert bcrypt_hash.keep_or_hash(PASSWORD, ["", "not a hash", None, earlier]) == earlier
    assert bcrypt_hash.keep_or_hash(PASSWORD, [earlier, earlier]) == earlier


def test_a_changed_password_or_a_weaker_hash_gets_a_new_hash():
    earlier = bcrypt_hash.new_hash(PASSWORD)
    changed = bcrypt_hash.keep_or_hash("another-password-0123456789", [earlier])
    assert changed != earlier and bcrypt_hash.verifies("another-password-0123456789", changed)
    weak = bcrypt_hash.new_hash(PASSWORD, rounds=4)
    stronger = bcrypt_hash.keep_or_hash(PASSWORD, [weak])
    assert stronger != weak and bcrypt_hash.cost(stronger) == bcrypt_hash.COST
    assert bcrypt_hash.verifies(PASSWORD, stronger)
    assert bcrypt_hash.keep_or_hash(PASSWORD, []) != earlier


@pytest.mark.parametrize("password", ["", "x" * 73, "a\0b", None])
def test_passwords_bcrypt_cannot_hash_are_refused(password):
    with pytest.raises(bcrypt_hash.BcryptError):
        bcrypt_hash.keep_or_hash(password)
    assert not bcrypt_hash.verifies(password, bcrypt_hash.new_hash(PASSWORD, rounds=4))


def test_a_missing_bcrypt_package_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "bcrypt", None)
    with pytest.raises(bcrypt_hash.BcryptError, match="pip install bcrypt"):
        bcrypt_hash.new_hash(PASSWORD)


def test_the_hashes_of_an_earlier_file_are_found():
    hashed = bcrypt_hash.new_hash(PASSWORD, rounds=4)
    text = "# Managed\nbasic_auth_users:\n  llmstack: %s\n  other: '%s'\n" % (hashed, hashed.replace("$2b$", "$2y$"))
    assert bcrypt_hash.find_hashes(text) == [hashed, hashed.replace("$2b$", "$2y$")]
    assert bcrypt_hash.find_hashes(text.replace(hashed, hashed[:-5])) == [hashed.replace("$2b$", "$2y$")]
    assert bcrypt_hash.find_hashes(None) == [] and bcrypt_hash.find_hashes("") == []
    assert bcrypt_hash.find_hashes("x" + hashed + "x") == []
