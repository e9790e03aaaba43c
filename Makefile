# kernelgen: `make demo` and `make test` work from a fresh clone.
PYTHON ?= python3
VENV := .venv
KG := $(VENV)/bin/kernelgen
# Debian packages the validation toolchains come from (README.md's Quickstart lists them; tests/conftest.py's
# requires_tool skips, or under CI's KERNELGEN_REQUIRE_TOOLCHAINS=1 fails, the tests whose tool is missing).
APT_PACKAGES := gcc g++ clang-19 lld-19 qemu-user pocl-opencl-icd ocl-icd-opencl-dev glslang-tools spirv-tools \
	mesa-vulkan-drivers libvulkan1 libvulkan-dev vulkan-validationlayers cmake ninja-build

# What `make demo` validates: every target once, the seeds' cases (000 on c, opencl, vulkan and as uint8 on hvx;
# 001's tiles; 002's layer on opencl and its walk-through conv on vulkan) and one imported block (MobileNetV2's, on
# all four), a few minutes of CPU at most (README.md, Quickstart). Every config on every target: make demo-all.
DEMO_CONFIGS := configs/seed000_baseline.yaml configs/hvx_seed000_baseline_u8.yaml configs/seed001_tiles.yaml \
	configs/seed002_opencl_small.yaml configs/seed002_vulkan_rgb.yaml configs/mobilenet_v2_block.yaml

.PHONY: demo demo-all test toolchains mesa-compilers goldens clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test,opencl,vulkan,onnx,plot]'
	touch $@

# Installs the Debian toolchains when run as root; otherwise says what is missing.
toolchains:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then echo "toolchains: all installed"; \
	elif [ "$$(id -u)" = 0 ]; then echo "toolchains: installing$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else echo "toolchains: not root, so not installing. Missing:$$missing"; \
		echo "  run: sudo apt-get install$$missing   (tests needing them are skipped until then)"; fi

# Mesa's Adreno (Turnip) and Mali (PanVK) compilers with their noop DRM shims, built from a pinned Debian source
# package into ~/.cache/kernelgen (kernelgen stats --device adreno-7xx|adreno-6xx|mali-valhall); rebuilt only when
# the pin changes; one line saying what is missing when it cannot. Then rusticl (OpenCL) with the same Mesa's
# freedreno and panfrost drivers (kernelgen stats --target opencl): rustc-web, LLVM 15 from apt, bindgen from pinned
# trixie crates (tools/rusticl_build.py); about an hour of CPU the first time.
mesa-compilers: $(VENV)/.installed
	$(VENV)/bin/python tools/mesa_compilers.py
	$(VENV)/bin/python tools/rusticl_build.py

test: toolchains mesa-compilers $(VENV)/.installed
	$(VENV)/bin/python -m pytest -q

demo: $(VENV)/.installed
	$(KG) build configs/*.yaml -o out/
	$(KG) plan configs/seed000_3x3.yaml
	$(KG) validate $(DEMO_CONFIGS) --skip-missing

# The whole matrix: every config on each of its targets (make test runs these kernels and more).
demo-all: $(VENV)/.installed
	$(KG) build configs/*.yaml -o out/
	$(KG) validate configs/*.yaml --skip-missing

# Regenerate the committed goldens (review the diff before committing).
goldens: $(VENV)/.installed
	$(KG) check configs/*.yaml --golden out/ --update
	$(KG) schema > schema/kernelgen.schema.json

clean:
	rm -rf $(VENV) build *.egg-info
