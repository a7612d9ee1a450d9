# runloom: set-up, build, demo, tests and benchmark. See README.md.
#
#   make demo    install missing packages, build Release into build/, run the demo
#   make test    install missing packages (with test-only ones), build and run
#                every test in build/, then the unit and conformance tests
#                under ASan+UBSan in build-asan/
#   make bench   build Release and print the benchmark as JSON
#   make build   build everything in build/ (Release)
#   make clean   remove build/ and build-asan/
#
# Every recipe line runs in bash with -euo pipefail: any failure stops make
# with a non-zero exit.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

JOBS ?= 2
BUILD_DIR ?= build
ASAN_DIR ?= build-asan
CLI_TARGET ?= runloom
RUNLOOM := ./$(BUILD_DIR)/runloom

# What `make demo` runs: a workflow file and its inputs.
DEMO ?= examples/blog.yaml

# build/ is configured the same way for demo, bench, build and test, so going
# from one to another never rebuilds everything.
RELEASE_FLAGS := -DCMAKE_BUILD_TYPE=Release -DRUNLOOM_WERROR=ON
ASAN_FLAGS := -DCMAKE_BUILD_TYPE=Asan -DRUNLOOM_WERROR=ON -DRUNLOOM_TESTING=ON
CTEST_SUMMARY := tests passed, [0-9]+ tests? failed out of|No tests were found

.PHONY: bootstrap bootstrap-test configure build cli demo bench test test-release test-asan clean

bootstrap:
	bash scripts/bootstrap.sh

bootstrap-test:
	bash scripts/bootstrap.sh --test

configure: bootstrap
	cmake -S . -B $(BUILD_DIR) $(RELEASE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS)

cli: configure
	cmake --build $(BUILD_DIR) --target $(CLI_TARGET) -j$(JOBS)

# On a terminal the demo asks for each approval; elsewhere (CI, pipes) it
# approves automatically.
demo: cli
	if [ -t 0 ] && [ -t 1 ]; then \
	  $(RUNLOOM) run $(DEMO) --db $(BUILD_DIR)/demo.db; \
	else \
	  $(RUNLOOM) run $(DEMO) --db $(BUILD_DIR)/demo.db --auto-approve; \
	fi

bench: cli
	$(RUNLOOM) bench --json

test: bootstrap-test
	$(MAKE) --no-print-directory test-release
	$(MAKE) --no-print-directory test-asan
	@echo "== ctest summary: $(BUILD_DIR) (Release, all labels), then $(ASAN_DIR) (ASan+UBSan, unit|conformance|chaos)"
	@grep -hE '$(CTEST_SUMMARY)' $(BUILD_DIR)/ctest.log $(ASAN_DIR)/ctest.log

# --no-tests=error: a run that finds no test fails instead of passing silently.
test-release:
	cmake -S . -B $(BUILD_DIR) $(RELEASE_FLAGS)
	cmake --build $(BUILD_DIR) -j$(JOBS)
	ctest --test-dir $(BUILD_DIR) --output-on-failure --no-tests=error -j$(JOBS) 2>&1 | tee $(BUILD_DIR)/ctest.log

test-asan:
	cmake -S . -B $(ASAN_DIR) $(ASAN_FLAGS)
	cmake --build $(ASAN_DIR) -j$(JOBS)
	UBSAN_OPTIONS="$${UBSAN_OPTIONS:-print_stacktrace=1}" \
	  ctest --test-dir $(ASAN_DIR) -L 'unit|conformance|chaos' --output-on-failure --no-tests=error -j$(JOBS) 2>&1 | tee $(ASAN_DIR)/ctest.log

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR)
