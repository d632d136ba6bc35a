"""A stand-in for the `docker` CLI with the Compose v2 plugin, for tests on a machine without a Docker engine.

There is no Docker engine here, and `docker compose` needs one even for `--dry-run`. This stand-in (run as
`python tools/docker_standin.py ARGS`, or through a `docker` wrapper script on PATH) answers what
community.docker.docker_compose_v2 asks before and around a `compose up|restart|down` - `docker version`, `docker
compose version`, `compose ps`, `compose images` - as Docker 26.1 with Compose v2.26.1 (the versions of Debian 13's
docker.io/docker-compose) would for a project without containers, accepts `compose up|restart|down|stop` without
doing anything, and appends every command line as one JSON list to the file named by DOCKER_STANDIN_LOG. Tests read
that file to check the options the roles pass (e.g. --remove-orphans). It does NOT run or emulate containers.
Anything else exits 1 with a message, so a new call shows up as a failure.
"""

import json
import os
import sys

VERSION = {"Client": {"Version": "26.1.5", "ApiVersion": "1.45", "Os": "linux", "Arch": "amd64"},
           "Server": {"Version": "26.1.5", "ApiVersion": "1.45", "MinAPIVersion": "1.24", "Os": "linux",
                      "Arch": "amd64", "Components": []}}
COMPOSE_VERSION = "v2.26.1"
ACCEPTED = ("up", "restart", "down", "stop", "start")


def subcommand(args):
    """The compose subcommand: the first word after compose's global options."""
    with_value = {"--ansi", "--progress", "--project-directory", "--project-name", "-p", "--file", "-f",
                  "--env-file", "--profile", "--parallel"}
    index = 0
    while index < len(args):
        if args[index] in with_value:
            index += 2
        elif args[index].startswith("-"):
            index += 1
        else:
            return args[index]
    return None


def strip_globals(argv):
    """The command line without docker's global options (--host X, --tlsverify, ...)."""
    with_value = {"--host", "-H", "--context", "-c", "--config", "--log-level", "-l", "--tlscacert", "--tlscert",
                  "--tlskey"}
    index = 0
    while index < len(argv) and argv[index].startswith("-"):
        index += 1 if "=" in argv[index] or argv[index] not in with_value else 2
    return argv[index:]


def main(argv):
    log = os.environ.get("DOCKER_STANDIN_LOG")
    if log:
        with open(log, "a") as handle:
            handle.write(json.dumps(argv) + "\n")
    argv = strip_globals(argv)
    if argv[:1] == ["version"]:
        print(json.dumps(VERSION))
        return 0
    if argv[:1] == ["compose"]:
        rest = argv[1:]
        if rest[:1] == ["version"]:
            print(json.dumps({"version": COMPOSE_VERSION}))
            return 0
        command = subcommand(rest)
        if command == "ps":
            return 0                      # no container: an empty JSON stream
        if command == "images":
            print("[]")
            return 0
        if command in ACCEPTED:
            return 0                      # nothing happens, and compose prints no event
    sys.stderr.write("docker_standin: not a call it answers: %s\n" % " ".join(argv))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
