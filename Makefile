# pvegpu.llmstack: make setup, make lab, make test (README.md).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT := $(CURDIR)
VENV := $(ROOT)/.venv
PY := $(VENV)/bin/python
export PATH := $(VENV)/bin:$(PATH)
export CONTAINERS_CONF := $(ROOT)/tests/harness/containers.conf
export ANSIBLE_CONFIG := $(ROOT)/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH := $(ROOT)/.cache/collections
export ANSIBLE_ROLES_PATH := $(ROOT)/roles
export ANSIBLE_CONNECTION_PLUGINS := $(ROOT)/tests/harness/connection_plugins
export ANSIBLE_NOCOLOR := 1
export PY_COLORS := 0
# The audit_log callback (enabled in ansible.cfg) records every run of the lab and the tests here.
export LLMSTACK_AUDIT_LOG ?= $(ROOT)/.cache/audit/audit.jsonl

COLLECTION_LINK := .cache/collections/ansible_collections/pvegpu/llmstack
# Debian packages the tests need (podman with runc and netavark, debootstrap for the images,
# shellcheck for ansible-test sanity; nginx, caddy, prometheus and rsyslog are run in the foreground by tests;
# chromium-headless-shell opens the burn-in report pages, screenshots them and records their requests:
# Debian's build, no browser download).
APT_PACKAGES := podman runc netavark aardvark-dns iptables uidmap slirp4netns fuse-overlayfs \
	debootstrap shellcheck docker-compose nginx caddy prometheus rsyslog \
	qemu-system-x86 ovmf qemu-utils mtools dosfstools fdisk chromium-headless-shell
# Roles the lab does not run: vfio (lab containers have no boot loader; its molecule scenarios run it with
# stand-ins for update-grub/proxmox-boot-tool/update-initramfs), nvidia (no GPU, NVIDIA's repository unreachable;
# molecule nvidia runs it in a systemd container with a stand-in repository) and burnin (no GPU; tagged never anyway;
# molecule burnin runs it with stand-in tools). network_policy runs with its PVE firewall backend only
# (inventories/lab: the unprivileged containers cannot load nftables rules; test_network_policy_role and
# test_network_policy do that).
LAB_SKIP_TAGS := vfio,nvidia,burnin
# Longest first (measured), so that the scenarios running side by side finish together; then the rest.
MOLECULE_LONGEST := nvidia tls_proxy monitoring burnin langfuse litellm vllm
MOLECULE_SCENARIOS := $(MOLECULE_LONGEST) $(filter-out $(MOLECULE_LONGEST),\
	$(sort $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml)))))
# pytest exits 5 when it collects no test: an empty stage is not a failure.
PYTEST = rc=0; $(PY) -m pytest $(1) || rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected in $(1)"; rc=0; fi; exit $$rc

.PHONY: help setup apt venv venv-litellm link image model test test-quick lint sanity units molecule integration \
	lab lab-up lab-down docs docs-check build ee bench clean

help:
	@echo "make setup       venv, Debian packages, podman config, base image (idempotent)"
	@echo "make lab         start the local lab and run site.yml against it (make lab-down removes it)"
	@echo "make test        lint + sanity + units + molecule + integration (what CI runs)"
	@echo "make test-quick  lint + units + the fast integration tests"
	@echo "make docs        regenerate the role READMEs and docs/roles/ from meta/argument_specs.yml"
	@echo "make build       build the collection tarball"
	@echo "make ee          write the execution environment's build context (ansible-builder create)"

# ---------------------------------------------------------------- setup
# The Debian packages first; then the two venvs (pip, mostly network) and the images (debootstrap) side by side.
setup:
	$(MAKE) --no-print-directory apt
	$(MAKE) --no-print-directory -j3 venv venv-litellm image
	$(MAKE) --no-print-directory link model

apt:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then echo "apt: all Debian packages present"; \
	elif [ "$$(id -u)" = 0 ]; then \
	  echo "apt: installing$$missing"; \
	  apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	else echo "apt: missing$$missing; run as root: apt-get install -y$$missing"; exit 1; fi

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-dev.txt
	touch $@

# LiteLLM in its own venv (tests and bench start the proxy from it).
LITELLM_VENV := $(ROOT)/.venv-litellm
venv-litellm: $(LITELLM_VENV)/.installed

$(LITELLM_VENV)/.installed: requirements-litellm.txt
	test -x $(LITELLM_VENV)/bin/python || python3 -m venv $(LITELLM_VENV)
	$(LITELLM_VENV)/bin/python -m pip install -q --disable-pip-version-check -r requirements-litellm.txt
	touch $@

link:
	@mkdir -p $(dir $(COLLECTION_LINK))
	@ln -sfn ../../../.. $(COLLECTION_LINK)
	@test -f $(COLLECTION_LINK)/galaxy.yml

# The base images (debootstrap; Debian 12 for the real vLLM's Python 3.11), then the lab's service images built from
# them (tests/harness/lab: Docker hosts, LiteLLM from PyPI, Prometheus & co from Debian, the real vLLM on its CPU
# backend, the GPU stand-ins); each is rebuilt only when its sources change.
image: apt
	tools/build-image.sh
	tools/build-image.sh --systemd
	LLMSTACK_IMAGE_SUITE=bookworm LLMSTACK_IMAGE=localhost/llmstack-debian12 tools/build-image.sh
	tools/build-lab-images.sh

# The lab's tiny model for the real vLLM (tools/build_tiny_model.py: offline, seeded; rebuilt when its inputs change).
model: venv
	$(PY) tools/build_tiny_model.py

# ---------------------------------------------------------------- tests
# Each stage's time is printed (CI's budget is 45 minutes on a fresh 2-core machine, setup included).
# tools/run-tests.sh runs two lanes side by side: integration (its lab test is the critical path) and, in the
# background, molecule, sanity, lint, units: molecule mostly waits on podman and apt, the others keep both cores busy.
test: link image model
	MAKE="$(MAKE)" tools/run-tests.sh

test-quick: lint units
	$(call PYTEST,tests/integration -m "not slow" -q -n 2 --dist loadfile --no-loadscope-reorder)

lint: link docs-check
	yamllint -s .
	ruff check plugins tools tests
	ansible-lint --profile production
	$(PY) tools/check_build.py

sanity: link
	tools/ansible-test.sh sanity

units: link
	$(call PYTEST,tests/unit -q)

# tools/run-molecule.sh prints each scenario's time and keeps its log; MOLECULE_JOBS scenarios run side by side (each
# has its own containers and molecule state). With the pipelined podman connection (one `podman exec` per task) a
# scenario mostly waits on podman, so three at a time on 2 cores took 229 s where one at a time took about 420 s.
MOLECULE_JOBS ?= 3
molecule: link image
	MOLECULE_JOBS=$(MOLECULE_JOBS) tools/run-molecule.sh $(MOLECULE_SCENARIOS)

# Each test file stays on one worker (the lab test brings the lab up and down once), the longest files first
# (tests/integration/conftest.py: LONGEST_FIRST; --no-loadscope-reorder keeps that order); the 40 slowest steps
# are printed, to see where the stage spends its time.
integration: link image
	$(call PYTEST,tests/integration -q -n 2 --dist loadfile --no-loadscope-reorder --durations=40)

bench: link
	$(PY) tools/bench.py
	$(PY) tools/bench_litellm.py
	$(PY) tools/bench_audit_log.py

# ---------------------------------------------------------------- lab
lab: setup lab-up
	ansible-playbook site.yml -i inventories/lab --skip-tags $(LAB_SKIP_TAGS)
	$(PY) tools/lab.py summary --skipped $(LAB_SKIP_TAGS)

lab-up: link
	$(PY) tools/lab.py up

lab-down:
	$(PY) tools/lab.py down

# ---------------------------------------------------------------- docs and build
docs:
	$(PY) tools/gen_role_docs.py

docs-check:
	$(PY) tools/gen_role_docs.py --check

build: link
	ansible-galaxy collection build --force

# The execution environment's build context (execution-environment.yml, docs/awx.md): the collection tarball and
# `ansible-builder create`. Building the image needs a container engine that can pull the base image (not here):
#   ansible-builder build -f execution-environment.yml -t llmstack-ee:$(shell awk '/^version:/{print $$2}' galaxy.yml)
EE_CONTEXT ?= $(ROOT)/.cache/ee
ee: link
	rm -rf .cache/ee-collection && mkdir -p .cache/ee-collection
	ansible-galaxy collection build --force --output-path .cache/ee-collection
	cp .cache/ee-collection/pvegpu-llmstack-*.tar.gz .cache/ee-collection/pvegpu-llmstack.tar.gz
	ansible-builder create -f execution-environment.yml -c $(EE_CONTEXT) --output-filename Containerfile

clean:
	rm -rf .cache tests/output pvegpu-llmstack-*.tar.gz
