# -*- coding: utf-8 -*-
# Copyright: (c) 2026, pvegpu.llmstack contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connecting to the PVE API with proxmoxer, for every module of the pvegpu.llmstack.pve action group."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.basic import env_fallback

try:
    from proxmoxer import ProxmoxAPI
    # ResourceException is re-exported for the modules (pve_api.ResourceException).
    from proxmoxer.core import AuthenticationError, ResourceException  # noqa: F401  pylint: disable=unused-import

    HAS_PROXMOXER = True
except ImportError:  # pragma: no cover - reported by the module
    ProxmoxAPI = AuthenticationError = ResourceException = None
    HAS_PROXMOXER = False


def pve_argument_spec():
    return dict(
        api_host=dict(type="str", required=True, fallback=(env_fallback, ["PROXMOX_HOST"])),
        api_port=dict(type="int", default=8006, fallback=(env_fallback, ["PROXMOX_PORT"])),
        api_user=dict(type="str", required=True, fallback=(env_fallback, ["PROXMOX_USER"])),
        api_password=dict(type="str", no_log=True, fallback=(env_fallback, ["PROXMOX_PASSWORD"])),
        api_token_id=dict(type="str", no_log=False, fallback=(env_fallback, ["PROXMOX_TOKEN_ID"])),
        api_token_secret=dict(type="str", no_log=True, fallback=(env_fallback, ["PROXMOX_TOKEN_SECRET"])),
        validate_certs=dict(type="bool", default=True, fallback=(env_fallback, ["PROXMOX_VALIDATE_CERTS"])),
        api_timeout=dict(type="int", default=30),
    )


PVE_REQUIRED_TOGETHER = [("api_token_id", "api_token_secret")]
PVE_REQUIRED_ONE_OF = [("api_password", "api_token_id")]
PVE_MUTUALLY_EXCLUSIVE = [("api_password", "api_token_id")]


def connect(module):
    """A ProxmoxAPI for the module's connection options; fails the module with a clear message."""
    if not HAS_PROXMOXER:
        module.fail_json(msg="the proxmoxer Python library is required on the host that runs this module")
    params = module.params
    auth = {"password": params["api_password"]}
    if params["api_token_id"]:
        token = params["api_token_id"]
        auth = {"token_name": token.split("!", 1)[1] if "!" in token else token,
                "token_value": params["api_token_secret"]}
    try:
        api = ProxmoxAPI(params["api_host"], port=params["api_port"], user=params["api_user"],
                         verify_ssl=params["validate_certs"], timeout=params["api_timeout"], **auth)
        api.version.get()
    except AuthenticationError as exc:
        module.fail_json(msg="PVE API %s:%s refused the credentials of %s: %s"
                         % (params["api_host"], params["api_port"], params["api_user"], exc))
    except Exception as exc:  # connection refused, TLS, timeouts: all mean the same to the user
        module.fail_json(msg="cannot reach the PVE API at %s:%s: %s" % (params["api_host"], params["api_port"], exc))
    return api
