# hybridhpc.slurm: `make lab` (embedded lab + site.yml), `make test` (everything).
# pytest runs get a --basetemp of their own: root's shared /tmp/pytest-of-root
# keeps only the newest three runs, so a concurrent pytest elsewhere would
# delete this run's temporary files under it.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
ROOT := $(CURDIR)
VENV := $(ROOT)/.venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
COLL_LINK := $(ROOT)/.collections/ansible_collections/hybridhpc/slurm
export PATH := $(BIN):$(PATH)
export ANSIBLE_CONFIG := $(ROOT)/ansible.cfg
export ANSIBLE_FORCE_COLOR ?= 0
export PY_COLORS ?= 0
LAB_INVENTORY ?= inventories/lab/hosts.yml
LAB_CTL := onprem-ctl1
# The lab's Debian suite, and with it the Slurm major: bookworm (22.05),
# trixie (24.11, the default), sid (26.05). `make lab LAB_SUITE=sid`,
# `make molecule LAB_SUITE=bookworm`. The image's tag is written to
# .lab-image for the default suite (what the tests and benches read) and to
# .lab-image-<suite> for the others.
LAB_SUITE ?= trixie
LAB_IMAGE_FILE := $(if $(filter trixie,$(LAB_SUITE)),.lab-image,.lab-image-$(LAB_SUITE))

# A real Kubernetes control plane for tests (tests/k8s_control_plane: etcd,
# kube-apiserver, kube-scheduler and kwok on 127.0.0.1), built from the Go
# module proxy by make k8s-bin, once per machine, into K8S_BIN_DIR (keyed by
# the versions; 397-440 s cold on 2 shared cores, nothing when cached: README).
# The versions are pinned here, and lab/k8s-bin/build.sh checks that the
# wrapper modules' go.mod and go.sum (lab/k8s-bin/{kubernetes,etcd,kwok}) build
# exactly these: kubernetes at K8S_VERSION with every staging module at its
# v0 release (v1.37.2 -> v0.37.2), etcd's server and sibling modules at
# ETCD_VERSION, kwok at KWOK_VERSION (its own k8s.io v0.36 libraries).
K8S_VERSION := v1.37.2
ETCD_VERSION := v3.6.17
KWOK_VERSION := v0.8.0
K8S_BIN_DIR := $(HOME)/.cache/hybridhpc/k8s-bin/k8s-$(K8S_VERSION)-etcd-$(ETCD_VERSION)-kwok-$(KWOK_VERSION)

.PHONY: test-main test-matrix matrix-converge property rules bench-exporter matrix matrix-2.18 matrix-2.18-checks matrix-2.18-converge matrix-2.19 lab lab-down lab-status test lint typecheck sanity unit integration molecule molecule-majors bench bench-power bench-converge build ee-context ee matrix-ee deps docker image clean k8s-bin k8s-bin-dir k8s-test

$(VENV)/.stamp: requirements-dev.txt
	@echo "make: python venv with pinned tools"
	@python3 -m venv $(VENV) || { echo "make: python3-venv missing (run as root to install it)"; exit 1; }
	@$(BIN)/pip install -q --upgrade pip
	@$(BIN)/pip install -q -r requirements-dev.txt
	@touch $@

$(COLL_LINK):
	@mkdir -p $(dir $(COLL_LINK))
	@ln -sfn $(ROOT) $(COLL_LINK)

deps: $(VENV)/.stamp $(COLL_LINK)

docker:
	@lab/ensure-docker.sh

# The tag file goes in through a file of this shell's own: make test's two
# chains may ask for the image at the same moment.
image: docker
	@tmp=$(LAB_IMAGE_FILE).new.$$$$; HYBRIDHPC_LAB_SUITE=$(LAB_SUITE) lab/build-image.sh > $$tmp && mv $$tmp $(LAB_IMAGE_FILE)

# HYBRIDHPC_LAB_CONNECTION=docker: docker exec instead of SSH (the inventory
# names no connection: Ansible's default, SSH, unless ANSIBLE_TRANSPORT says).
LAB_TRANSPORT = $(if $(filter docker,$(HYBRIDHPC_LAB_CONNECTION)),ANSIBLE_TRANSPORT=community.docker.docker)

lab: docker deps image
	@echo "make: lab containers"
	@$(PY) lab/labctl.py up --inventory $(LAB_INVENTORY) --image $$(cat $(LAB_IMAGE_FILE))
	@echo "make: ansible-playbook playbooks/site.yml (lab)"
	@HYBRIDHPC_LAB_IMAGE=$$(cat $(LAB_IMAGE_FILE)) $(LAB_TRANSPORT) $(BIN)/ansible-playbook -i $(LAB_INVENTORY) playbooks/site.yml
	@lab/smoke.sh $(LAB_CTL)
	@echo "make: lab is up (make lab-down removes it); a second 'make lab' re-runs site.yml, expecting changed=0"

lab-down:
	@$(PY) lab/labctl.py down 2>/dev/null || python3 lab/labctl.py down

lab-status:
	@$(PY) lab/labctl.py status

# make test runs two chains side by side (CI has 90 minutes on 2 cores, and
# much of a scenario's time is waiting on its containers): in the foreground
# the checks and the scenarios on trixie (test-main); in the background the
# other cores of the matrix, the execution environment, the other Slurm
# majors and the cores' converge legs (test-matrix), its output in
# .cache/test-matrix.log, printed once both are done. Scenarios and legs that
# bring up the same containers hold the same lock (LOCKS), so they never run at
# once. A failed foreground stops the background chain.
LOCKS := $(ROOT)/.cache/locks
# The machine's CPU use every 30 s while the chains run (vmstat: user, system,
# idle, wait, steal) goes to .cache/vmstat.log, its means printed at the end:
# idle time is room for more work beside the chains, steal the VM's host.
test: docker deps image
	@mkdir -p $(LOCKS); start=$$(date +%s); \
	 vmstat_pid=; if command -v vmstat >/dev/null; then vmstat -n 30 > $(ROOT)/.cache/vmstat.log 2>/dev/null & vmstat_pid=$$!; fi; \
	 setsid $(MAKE) --no-print-directory test-matrix > $(ROOT)/.cache/test-matrix.log 2>&1 < /dev/null & matrix=$$!; \
	 echo "make: test-matrix in the background (pid $$matrix, .cache/test-matrix.log)"; \
	 $(MAKE) --no-print-directory test-main 2>&1 | tee $(ROOT)/.cache/test-main.log; main=$${PIPESTATUS[0]}; \
	 [ $$main -eq 0 ] || kill -TERM -- -$$matrix 2>/dev/null || true; \
	 rc=0; wait $$matrix || rc=$$?; \
	 echo "make: test-matrix (.cache/test-matrix.log):"; cat $(ROOT)/.cache/test-matrix.log; \
	 [ -z "$$vmstat_pid" ] || kill $$vmstat_pid 2>/dev/null || true; \
	 awk '$$1 ~ /^[0-9]+$$/ && NR > 3 {n++; us+=$$13; sy+=$$14; id+=$$15; wa+=$$16; st+=$$17} \
	   END {if (n) printf "make: CPU over %d samples of 30 s: user %.0f%%, system %.0f%%, idle %.0f%%, wait %.0f%%, steal %.0f%%\n", \
	   n, us/n, sy/n, id/n, wa/n, st/n}' $(ROOT)/.cache/vmstat.log 2>/dev/null || true; \
	 for chain in main matrix; do $(PY) tests/failures.py $(ROOT)/.cache/test-$$chain.log "test-$$chain"; done; \
	 echo "make: test-main $$([ $$main -eq 0 ] && echo passed || echo FAILED), test-matrix $$([ $$rc -eq 0 ] && echo passed || echo FAILED), $$(( $$(date +%s) - start ))s in all"; \
	 [ $$main -eq 0 ] && [ $$rc -eq 0 ] && echo "make: all tests passed"

# Each chain's output is in .cache/test-main.log and .cache/test-matrix.log;
# the lines that say why a step failed are printed again at the end
# (tests/failures.py), where CI's tail shows them.

# The two chains, from CI's times (566c142 on 3 December 2026: 82 minutes,
# over budget) less what has been cut since (the execution environment is
# rebuilt only when its dependencies change; the copilot's files in one step).
# In the background, after the execution environment's checks: default, then
# the federated lab's chain, which holds one lock ("lab") and so runs in one
# chain: the converge legs (2.21 cold, 2.20 and 2.18 changed=0) hand the lab
# over converged to the federation scenario (HYBRIDHPC_LAB_CONVERGED: no
# labctl down and up, and its converge finds the lab converged but for what
# its prepare step changed), then upgrade (whose cold converge of that lab is
# 2.19's), then core on bookworm and sid, and single_node. In the foreground,
# after the checks: core on trixie (before the other majors', one lock),
# colocation, lifecycle, faults (on lifecycle's lab). In CI of 76f36cb (3
# December 2026), with sid's core in the foreground, the foreground ended
# about 65 minutes in and the background about 54 (its execution environment
# steps took 4.5 minutes instead of 18): sid's core moved to the background.
# Since 4 December the federation scenario also moves its lab to auth/slurm
# and back (about 7 minutes): single_node runs in the foreground, where
# colocation on the real control plane takes about 2.5 minutes less than on
# the API double and make k8s-test 30 s (with make k8s-bin's cache; a cold
# build of the binaries adds about 7 minutes there).
BACKGROUND_FIRST := default
LAB_CHAIN := federation upgrade
# single_node runs in the foreground since the federation scenario moves to
# auth/slurm and back (about 7 minutes more in the background).
BACKGROUND_LAST :=
BACKGROUND_SCENARIOS := $(BACKGROUND_FIRST) $(LAB_CHAIN) $(BACKGROUND_LAST)
MAIN_SCENARIOS = $(filter-out $(BACKGROUND_SCENARIOS),$(MOLECULE_SCENARIOS))
test-main: lint typecheck sanity unit k8s-test rules integration
	@date +'make: %T test-main: molecule $(MAIN_SCENARIOS)'; $(MAKE) --no-print-directory molecule MOLECULE_SCENARIOS="$(MAIN_SCENARIOS)"
	@date +'make: %T test-main: done'

# The lab-free steps first. 2.19's converge of the lab is upgrade's (make
# matrix-2.19 converges it from the tarball too).
# Each step's start time is printed (date +%T), to see where CI's minutes go.
CONVERGED := $(ROOT)/.cache/lab-converged
test-matrix: deps build image
	@date +'make: %T test-matrix: matrix-2.18-checks'; $(MAKE) --no-print-directory matrix-2.18-checks
	@date +'make: %T test-matrix: matrix-ee unit,sanity,smoke'; $(MAKE) --no-print-directory matrix-ee EE_STEPS=unit,sanity,smoke
	@date +'make: %T test-matrix: $(filter $(BACKGROUND_FIRST),$(MOLECULE_SCENARIOS))'; \
	 $(MAKE) --no-print-directory molecule MOLECULE_SCENARIOS="$(filter $(BACKGROUND_FIRST),$(MOLECULE_SCENARIOS))"
	@date +'make: %T test-matrix: matrix-converge, handed over to $(filter $(LAB_CHAIN),$(MOLECULE_SCENARIOS))'; \
	 $(MAKE) --no-print-directory matrix-converge LEG_HANDOVER=$(if $(filter federation,$(MOLECULE_SCENARIOS)),$(CONVERGED)) && \
	 $(MAKE) --no-print-directory molecule MOLECULE_SCENARIOS="$(filter $(LAB_CHAIN),$(MOLECULE_SCENARIOS))" HYBRIDHPC_LAB_CONVERGED=$(CONVERGED)
	@date +'make: %T test-matrix: molecule-majors $(MAJOR_SUITES)'; $(MAKE) --no-print-directory molecule-majors
	@date +'make: %T test-matrix: $(filter $(BACKGROUND_LAST),$(MOLECULE_SCENARIOS))'; \
	 $(MAKE) --no-print-directory molecule MOLECULE_SCENARIOS="$(filter $(BACKGROUND_LAST),$(MOLECULE_SCENARIOS))"
	@date +'make: %T test-matrix: done'

lint: deps docs-deps
	@date +'make: %T lint'
	@echo "make: ansible-lint (production profile), yamllint, ruff, antsibull-changelog lint"
	@$(BIN)/ansible-lint --profile production --offline
	@$(DOCS_RUN) antsibull-docs lint-collection-docs --plugin-docs .
	@$(BIN)/ruff check plugins tests lab extensions roles/copilot/files/copilot roles/power_save/files/hybridhpc_power \
	  roles/monitoring/files/hybridhpc_exporter roles/node_health/files/hybridhpc_health
	@$(BIN)/antsibull-changelog lint

# mypy --strict over the copilot package; its settings are in the copilot's pyproject.toml
# ([tool.mypy]). The vendored client is copied first: the package imports it.
MYPY ?= $(BIN)/mypy
typecheck: deps
	@echo "make: mypy --strict (the copilot)"
	@PYTHON=$(PY) sh roles/copilot/files/copilot/tools/vendor.sh
	@cd roles/copilot/files/copilot && $(MYPY) --config-file pyproject.toml

sanity: deps
	@date +'make: %T sanity'
	@echo "make: ansible-test sanity"
	@tests/sanity.sh

# The copilot's property test draws new random interleavings on every run:
# make test draws PROPERTY_EXAMPLES_TEST of them (with the two found in CI
# before, always), about 80 s of CI's time; make property draws 10,000 (about
# 5 minutes on a quiet machine; before a release and after a change to the
# copilot's passes).
PROPERTY_EXAMPLES_TEST ?= 2500
unit: deps
	@date +'make: %T unit'
	@echo "make: pytest unit tests (plugins, roles' templates, the copilot with $(PROPERTY_EXAMPLES_TEST) random interleavings, the Kubernetes API double, hybridhpc-power)"
	@HYBRIDHPC_PROPERTY_EXAMPLES=$(PROPERTY_EXAMPLES_TEST) $(BIN)/pytest -q --basetemp=$(ROOT)/.cache/pytest-unit tests/unit roles/copilot/files/copilot/tests tests/k8s_double \
	  roles/power_save/files/hybridhpc_power/tests roles/monitoring/files/hybridhpc_exporter/tests roles/node_health/files/hybridhpc_health/tests

property: deps k8s-bin
	@echo "make: the copilot's property test, 10,000 random interleavings on the API double and 1,000 on the real API server"
	@HYBRIDHPC_PROPERTY_EXAMPLES=10000 $(BIN)/pytest -q -s -p no:cacheprovider roles/copilot/files/copilot/tests/test_copilot_property.py
	@HYBRIDHPC_K8S_BIN=$(K8S_BIN_DIR) HYBRIDHPC_REAL_PROPERTY_EXAMPLES=1000 $(BIN)/pytest -q -s -p no:cacheprovider \
	  tests/k8s_control_plane/test_property_on_real_server.py

# The monitoring role's alert rules through Prometheus's promtool (check rules,
# test rules), the promtool of Debian's package (tests/rules/promtool.sh).
rules: deps
	@echo "make: promtool check rules and test rules (the monitoring role's alerts)"
	@PROMTOOL=$$(tests/rules/promtool.sh) $(BIN)/pytest -q -p no:cacheprovider tests/rules

integration: deps image
	@date +'make: %T integration'
	@echo "make: pytest integration tests (bad inventories, AWX through ansible-runner on its own lab)"
	@$(BIN)/pytest -q --basetemp=$(ROOT)/.cache/pytest-integration tests/integration

# core is also the monitoring scenario (Prometheus, Alertmanager, the
# exporters, health checks): one converge of one cluster for both, on every
# major (on sid slurmctld's own metrics endpoints, MetricsType=metrics/openmetrics).
MOLECULE_SCENARIOS ?= default core single_node federation colocation lifecycle faults upgrade
# The other Slurm majors run the core scenario (one cluster, accounting, jobs,
# REST, monitoring, idempotence); the default suite runs every scenario above.
MAJOR_SUITES ?= bookworm sid
MAJOR_SCENARIOS ?= core

# The scenarios on the federated lab's host names (federation, upgrade) hold
# the lock "lab", as the matrix's converge legs do; faults, on the lifecycle
# lab, holds lifecycle's; any other scenario holds its own name's (core runs
# on each major). When faults follows lifecycle, lifecycle hands its converged
# lab over (HYBRIDHPC_LAB_HANDOFF) instead of removing it: one converge less.
HANDOFF := $(ROOT)/.cache/lab-handoff
# A scenario that hangs (a job that never starts, a daemon that never answers)
# fails after this many seconds, naming itself, instead of running out CI's
# clock; the longest, lifecycle, takes about 18 minutes in CI. The lock wait is
# not counted.
MOLECULE_TIMEOUT ?= 2700
# colocation and upgrade run etcd, kube-apiserver and kwok from make k8s-bin in a controller container.
molecule: deps image $(if $(filter colocation upgrade,$(MOLECULE_SCENARIOS)),k8s-bin)
	@mkdir -p $(LOCKS); rm -rf $(HANDOFF); handoff=; \
	 case " $(MOLECULE_SCENARIOS) " in *" lifecycle "*"faults "*) handoff=$(HANDOFF) ;; esac; \
	 for s in $(MOLECULE_SCENARIOS); do \
	  case $$s in federation|upgrade) lock=lab ;; faults) lock=lifecycle ;; *) lock=$$s ;; esac; \
	  echo "make: $$(date +%T) molecule test -s $$s ($(LAB_SUITE))"; \
	  start=$$(date +%s); \
	  (cd extensions && HYBRIDHPC_K8S_BIN=$(K8S_BIN_DIR) HYBRIDHPC_LAB_HANDOFF=$$handoff HYBRIDHPC_LAB_CONVERGED=$(HYBRIDHPC_LAB_CONVERGED) HYBRIDHPC_LAB_IMAGE=$$(cat ../$(LAB_IMAGE_FILE)) \
	   flock $(LOCKS)/$$lock.lock timeout -k 60 $(MOLECULE_TIMEOUT) $(BIN)/molecule test -s $$s) \
	   || { rc=$$?; [ $$rc -ne 124 ] || echo "make: molecule scenario $$s ran past $(MOLECULE_TIMEOUT)s (MOLECULE_TIMEOUT) and was stopped"; exit 1; }; \
	  echo "make: molecule scenario $$s passed in $$(( $$(date +%s) - start ))s"; \
	done

molecule-majors:
	@for suite in $(MAJOR_SUITES); do \
	  $(MAKE) --no-print-directory molecule LAB_SUITE=$$suite MOLECULE_SCENARIOS="$(MAJOR_SCENARIOS)" || exit 1; \
	done

# Every bench runs, each reporting its verdicts, and then make bench fails
# if one missed a target or failed (a miss in one no longer hides the others).
bench: deps k8s-bin
	@failed=; \
	 for b in power exporter hostlist copilot; do \
	  echo "make: $$(date +%T) bench $$b"; \
	  [ $$b != copilot ] || echo "make: copilot daemon at 1,000 and 10,000 GenericNodes on a real kube-apiserver, etcd and kwok (a few minutes; report in .cache/bench/copilot.json)"; \
	  HYBRIDHPC_K8S_BIN=$(K8S_BIN_DIR) $(PY) tests/bench/bench_$$b.py || failed="$$failed $$b"; \
	 done; \
	 if [ -n "$$failed" ]; then echo "make: bench: a target missed or a bench failed in:$$failed (its verdicts above)"; exit 1; fi

# The slurm exporter scraped for 1,000 nodes and 1,000 jobs (a generated
# slurmrestd answer served on loopback): median scrape seconds and peak RSS.
# Report in .cache/bench/exporter.json.
bench-exporter: deps
	@$(PY) tests/bench/bench_exporter.py

# Cloud burst: the aws provider resuming and suspending 1,000 nodes against
# moto's EC2 server on loopback (API calls), the reconciler with 10,000 cloud
# nodes, and (when the lab is up: make lab) submit to RUNNING on a powered-down
# lab node. Report in .cache/bench/power.json.
bench-power: deps
	@$(PY) tests/bench/bench_power.py

# site.yml cold and no-op on lab containers: the federated lab over SSH and
# over docker, a 3-host cluster, and 3/9/17 compute nodes (seconds per added
# node), from the lab image and from a compute image that has the node's
# packages (lab/image/compute, built once), and what apt alone costs a
# node (the floor of the cold seconds per added node with apt). About 40
# minutes on a quiet machine; BENCH_CASES=single3,scale3 picks some. Each no-op is run
# BENCH_NOOP_RUNS times and the median reported; each size of a series is
# converged cold BENCH_COLD_RUNS times, each time on fresh containers. With BENCH_GALAXY_ROLE
# naming an installed copy of galaxyproject.slurm, galaxy3 runs that role on
# single3's shape beside it (4 more minutes: its cold run waits twice for
# slurmd's 90 s start).
BENCH_CASES ?= federated5-ssh,federated5-docker,single3,galaxy3,scale3,scale9,scale17,imaged3,imaged9,imaged17
BENCH_NOOP_RUNS ?= 5
BENCH_COLD_RUNS ?= 3
bench-converge: docker deps image
	@$(PY) tests/bench/bench_converge.py --cases $(BENCH_CASES) --noop-runs $(BENCH_NOOP_RUNS) --cold-runs $(BENCH_COLD_RUNS)


# The ansible-core matrix (README "Supported Ansible"). 2.19 is the project
# venv's core, so every other target tests it; 2.18 gets a venv of its own
# with the same tools (requirements-dev.txt with its two pins swapped);
# 2.20 and 2.21 need Python 3.12+ and run in the execution environment
# (matrix-ee). Each leg: ansible-test sanity, the unit tests, and the
# federated lab converged from the built tarball with a stock ansible.cfg
# (lab/converge-leg.sh: cold, re-run changed=0, a job on each cluster).
CORE_218 := 2.18.19
ANSIBLE_218 := 11.13.0
VENV_218 := $(ROOT)/.cache/venv-$(CORE_218)

$(VENV_218)/.stamp: requirements-dev.txt
	@echo "make: venv for ansible-core $(CORE_218)"
	@mkdir -p $(ROOT)/.cache
	@sed -e 's/^ansible-core==.*/ansible-core==$(CORE_218)/' -e 's/^ansible==.*/ansible==$(ANSIBLE_218)/' \
	  requirements-dev.txt > $(ROOT)/.cache/requirements-$(CORE_218).txt
	@python3 -m venv $(VENV_218)
	@$(VENV_218)/bin/pip install -q --upgrade pip
	@$(VENV_218)/bin/pip install -q -r $(ROOT)/.cache/requirements-$(CORE_218).txt
	@touch $@

matrix-2.18: matrix-2.18-checks matrix-2.18-converge

matrix-2.18-checks: deps $(VENV_218)/.stamp
	@echo "make: ansible-core $(CORE_218): sanity, unit tests"
	@PATH=$(VENV_218)/bin:$$PATH HYBRIDHPC_SANITY_DIR=$(ROOT)/.cache/sanity-$(CORE_218) tests/sanity.sh
	@$(VENV_218)/bin/pytest -q -p no:cacheprovider --basetemp=$(ROOT)/.cache/pytest-unit-$(CORE_218) tests/unit

matrix-2.18-converge: deps build image $(VENV_218)/.stamp
	@echo "make: ansible-core $(CORE_218): lab converge"
	@LEG_GALAXY=$(VENV_218)/bin/ansible-galaxy lab/converge-leg.sh $(CORE_218) $(VENV_218)/bin/ansible-playbook

# make test's converge legs on one federated lab, for CI's time (make
# matrix-2.18-converge and make matrix-ee converge each legs on a fresh lab):
# ansible-core 2.21 (the execution environment) converges it cold, again with
# changed=0, and runs a job on each cluster; then 2.20's and 2.18's site.yml
# must each find every host converged (changed=0). 2.18's and 2.20's cold runs
# are make matrix's. The lab's lock is held across the three, so no scenario
# takes the lab's names in between. With LEG_HANDOVER (a file), the lab stays
# up when all three passed and the file names its inventory: make test's
# federation scenario takes it over converged (HYBRIDHPC_LAB_CONVERGED).
LEG_HANDOVER ?=
matrix-converge: deps build image ee $(VENV_218)/.stamp $(COLL_LINK)
	@mkdir -p $(LOCKS); exec 9>$(LOCKS)/lab.lock; flock 9; export LEG_LOCKED=1; rc=0; \
	 $(if $(LEG_HANDOVER),rm -f $(LEG_HANDOVER);) \
	 LEG_KEEP=1 lab/ee/matrix.sh 2.21 converge || rc=1; \
	 [ $$rc -ne 0 ] || LEG_KEEP=1 LEG_LAB=reuse lab/ee/matrix.sh 2.20 converge || rc=1; \
	 [ $$rc -ne 0 ] || { echo "make: ansible-core $(CORE_218): site.yml on the converged lab"; \
	   LEG_KEEP=1 LEG_LAB=reuse LEG_GALAXY=$(VENV_218)/bin/ansible-galaxy lab/converge-leg.sh $(CORE_218) $(VENV_218)/bin/ansible-playbook; } || rc=1; \
	 if [ $$rc -eq 0 ] && [ -n "$(LEG_HANDOVER)" ]; then printf inventories/lab/hosts.yml > $(LEG_HANDOVER); \
	   echo "make: the converged lab handed over ($(LEG_HANDOVER))"; \
	 else $(PY) lab/labctl.py down --inventory inventories/lab/hosts.yml >/dev/null 2>&1 || true; fi; \
	 exit $$rc

# 2.19's sanity and unit tests are make sanity and make unit.
matrix-2.19: deps build image
	@echo "make: ansible-core 2.19 (the project venv): lab converge"
	@LEG_GALAXY=$(BIN)/ansible-galaxy lab/converge-leg.sh 2.19 $(BIN)/ansible-playbook

matrix: matrix-2.18 matrix-2.19 matrix-ee

# The collection as users get it: build/hybridhpc-slurm-<version>.tar.gz (only
# the current one, which the execution environment installs).
build: deps
	@rm -f build/hybridhpc-slurm-*.tar.gz
	@$(BIN)/ansible-galaxy collection build --force --output-path build

# The docs site, from the plugins' and roles' own documentation (antsibull-docs,
# Sphinx: .cache/docs-site/build/html), offline. Its tools are in a venv of their
# own (requirements-docs.txt); the collection's dependencies come from the
# project venv's `ansible` package. Intersphinx stays off (no network), so the
# links into Ansible's own docs and other collections' stay unresolved and do
# not fail the build; a dangling reference into this collection's does.
DOCS_VENV := $(ROOT)/.cache/docs-venv
DOCS_SITE := $(ROOT)/.cache/docs-site
DOCS_RUN = PATH=$(DOCS_VENV)/bin:$$PATH ANSIBLE_COLLECTIONS_PATH=$(ROOT)/.collections:$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
.PHONY: docs docs-deps

$(DOCS_VENV)/.stamp: requirements-docs.txt
	@echo "make: docs venv (antsibull-docs, Sphinx)"
	@python3 -m venv $(DOCS_VENV)
	@$(DOCS_VENV)/bin/pip install -q --upgrade pip
	@$(DOCS_VENV)/bin/pip install -q -r requirements-docs.txt
	@touch $@

docs-deps: $(DOCS_VENV)/.stamp

docs: deps docs-deps
	@echo "make: docs site (antsibull-docs sphinx-init, sphinx-build)"
	@rm -rf $(DOCS_SITE) && mkdir -p $(DOCS_SITE)
	@$(DOCS_RUN) antsibull-docs sphinx-init --use-current --dest-dir $(DOCS_SITE) hybridhpc.slurm >/dev/null
	@printf '%s\n' '' 'intersphinx_mapping = {}' \
	  "nitpick_ignore_regex = [('std:ref', r'(?!ansible_collections\.hybridhpc\.slurm\.).*')]" \
	  >> $(DOCS_SITE)/conf.py
	@$(DOCS_RUN) $(DOCS_SITE)/build.sh
	@echo "make: $$(find $(DOCS_SITE)/build/html -name '*.html' | wc -l) pages in $(DOCS_SITE)/build/html"

# The execution environment's build context (offline; the base image is the
# lab's local trixie rootfs, `make image`).
ee-context: build
	@rm -rf build/ee
	@$(BIN)/ansible-builder create -f execution-environment.yml -c build/ee --output-filename Containerfile

# The execution environment's images, one per ansible-core leg (EE_LEGS), built
# locally from that context (lab/ee/build.sh; cached by a hash of the inputs):
# hybridhpc/slurm-ee:2.21 (ansible-core 2.21.5, ansible 14.5.0) and :2.20
# (2.20.10, 13.8.0), each with a test image hybridhpc/slurm-ee-test:<leg>.
EE_LEGS ?= 2.21 2.20
ee: docker ee-context
	@docker image inspect hybridhpc/debian-trixie-rootfs:v2 >/dev/null 2>&1 || $(MAKE) --no-print-directory image
	@mkdir -p .cache && lab/ee/build.sh build/ee $(EE_LEGS) > .cache/ee-images.new && mv .cache/ee-images.new .cache/ee-images

# In each EE leg: the unit tests (pytest -q tests/unit on the checkout mounted
# read-only), ansible-test sanity for that core, a smoke of the installed
# collection (ansible-doc -l, site.yml --syntax-check, stock config) and the
# federated lab converged by the EE (lab/converge-leg.sh: cold, changed=0, a
# job on each cluster). Each step's wall time is printed; a failing step fails
# the target after every leg ran. lab/ee/run.sh is the one place that knows
# the container's mounts (--lab adds the lab's network and SSH config).
# EE_STEPS=unit,smoke picks steps.
EE_STEPS ?= unit,sanity,smoke,converge
matrix-ee: ee $(COLL_LINK)
	@rc=0; for leg in $(EE_LEGS); do \
	  lab/ee/matrix.sh "$$leg" "$(EE_STEPS)" || rc=1; \
	done; exit $$rc

k8s-bin:
	@K8S_VERSION=$(K8S_VERSION) ETCD_VERSION=$(ETCD_VERSION) KWOK_VERSION=$(KWOK_VERSION) lab/k8s-bin/build.sh $(K8S_BIN_DIR)

# Where the binaries are (the test fixture asks, when HYBRIDHPC_K8S_BIN is unset).
k8s-bin-dir:
	@echo $(K8S_BIN_DIR)

# The copilot's property test on the real API server: about half a second per
# interleaving (each a hundred requests or so to kube-apiserver), so fewer than
# on the double; make property draws more of both.
REAL_PROPERTY_EXAMPLES ?= 200
k8s-test: deps k8s-bin
	@echo "make: pytest the control plane (etcd, kube-apiserver, kube-scheduler, kwok on 127.0.0.1) from $(K8S_BIN_DIR)"
	@mkdir -p $(ROOT)/.cache; HYBRIDHPC_K8S_BIN=$(K8S_BIN_DIR) HYBRIDHPC_REAL_PROPERTY_EXAMPLES=$(REAL_PROPERTY_EXAMPLES) \
	  $(BIN)/pytest -q --basetemp=$(ROOT)/.cache/pytest-k8s tests/k8s_control_plane

clean: lab-down
	@rm -rf $(VENV) .collections .cache build .lab-image*
