# runloom: set-up, build, demo, tests and benchmark. See README.md.
#
#   make demo    install missing packages, build the runloom binary (Release,
#                no tests) into build/, run the demo
#   make test    install missing packages (with test-only ones), then:
#                test-release        build/ (Release, tests on): build, run
#                                    every test but those test-asan runs
#                                    (each test runs once in `make test`)
#                test-headers        build/: each public header compiled alone
#                test-thread-safety  clang -Wthread-safety -Werror over build/'s
#                                    translation units (syntax only; test
#                                    units only where they name an
#                                    annotated lock)
#                test-asan           build-asan/ (ASan+UBSan, RUNLOOM_TESTING):
#                                    unit, conformance and chaos tests but the
#                                    long KillCampaign ones (Release runs
#                                    them)
#                test-tsan           build-tsan/ (TSan, RUNLOOM_TESTING): the
#                                    engine, decision, write-queue and chaos tests
#                test-fuzz           build-fuzz/ (clang, libFuzzer+ASan+UBSan):
#                                    the two fuzz targets in tests/fuzz, side
#                                    by side, each run FUZZ_SECONDS (60) on a
#                                    copy of its checked-in corpus
#                test-setup          scripts/test-setup.sh: `setup.sh demo` in
#                                    a fresh clone without the test-only tools
#                and prints each step's time. The builds of test-asan,
#                test-tsan and test-fuzz (make build-asan, build-tsan,
#                build-fuzz) run in the background from the start, at idle
#                CPU priority (scripts/prebuild.sh); those steps wait for them.
#   make bench   build Release and print the benchmark as JSON
#   make bench-waiting  build Release and measure 100,000 runs waiting at once
#                (timers and signals) as JSON
#   make bench-fairness build Release and measure fair dequeue across concurrency keys
#   make bench-http  build Release, install wrk and node if missing, and run
#                the HTTP benchmarks once each (bench/http/run.sh post, sse, stream)
#   make bench-compare  build Release, install Redis, PostgreSQL and npm if
#                missing, and run runloom against BullMQ flows (embedded, with
#                --sync full too) and against DBOS on PostgreSQL, 3 alternating
#                pairs of 10,000 each (bench/compare/; about 10 minutes)
#   make build   build the engine, the CLI and the example programs in build/
#                (Release, no tests)
#   make package build the runloom binary (as `make cli`) and the Debian
#                package build/runloom_VERSION_ARCH.deb with cpack
#                (cmake/Package.cmake; docs/operations.md, "Installing the
#                Debian package")
#   make clean   remove build/, build-asan/, build-tsan/ and build-fuzz/
#
# Every recipe line runs in bash with -euo pipefail: any failure stops make
# with a non-zero exit.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

JOBS ?= 2
BUILD_DIR ?= build
ASAN_DIR ?= build-asan
TSAN_DIR ?= build-tsan
FUZZ_DIR ?= build-fuzz
CLI_TARGET ?= runloom
RUNLOOM := ./$(BUILD_DIR)/runloom

# What `make demo` runs: a workflow file and its inputs.
DEMO ?= examples/blog.yaml

# Ninja compiles the units of several targets side by side (with the unity
# build, CMakeLists.txt, a target is one or a few units); Make's generator
# would wait for each library before its dependents. A build directory made
# with another generator is started afresh (cmake refuses to switch).
GENERATOR ?= Ninja
# build/ is compiled the same way for demo, bench, build and test (tests only
# add targets), so going from one to another never rebuilds the engine. The
# demo, build and bench configure it without tests: they need none of the
# test packages.
RELEASE_FLAGS := -DCMAKE_BUILD_TYPE=Release -DRUNLOOM_WERROR=ON
APP_FLAGS := $(RELEASE_FLAGS) -DRUNLOOM_BUILD_TESTS=OFF
TEST_FLAGS := $(RELEASE_FLAGS) -DRUNLOOM_BUILD_TESTS=ON -DRUNLOOM_SKIP_ASAN_TESTS=ON
# The tests `make test-asan` runs under ASan+UBSan; `make test-release` runs
# every other one (CMakeLists.txt: RUNLOOM_SKIP_ASAN_TESTS leaves their
# binaries out of build/). Each test runs once: in a fresh-clone CI run the
# Release step ran these too, 1,284 s of test time and 6 minutes of its
# wall time with the builds of their binaries.
# The label every-build runs in both: tests whose expectations differ by
# build type (crash points and event checks compiled out of Release, the
# simulator's full 300-seed campaign in Release, 100 seeds under ASan).
ASAN_ONLY_LABELS := ^(unit|conformance|chaos|regression)$$
ASAN_LABELS := ^(unit|conformance|chaos|regression|every-build)$$
ASAN_FLAGS := -DCMAKE_BUILD_TYPE=Asan -DRUNLOOM_WERROR=ON -DRUNLOOM_TESTING=ON -DRUNLOOM_BUILD_TESTS=ON
TSAN_FLAGS := -DCMAKE_BUILD_TYPE=Tsan -DRUNLOOM_WERROR=ON -DRUNLOOM_TESTING=ON -DRUNLOOM_BUILD_TESTS=ON
# The fuzz build: clang, every runloom source instrumented (RUNLOOM_FUZZ in
# CMakeLists.txt), no tests; only the fuzz targets and what they link are built.
FUZZ_FLAGS := -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRUNLOOM_WERROR=ON \
  -DRUNLOOM_FUZZ=ON -DRUNLOOM_BUILD_TESTS=OFF
FUZZ_TARGETS := workflow_loader inputs
FUZZ_SECONDS ?= 60
# An input that runs longer than 5 s, or a process above 512 MB, is a
# finding, like a crash. ASan's quarantine of freed memory (256 MB by default)
# alone would take the process past 512 MB within a minute of small inputs,
# so it is cut to 64 MB: one input's blow-up still shows, the quarantine's
# slow growth does not.
FUZZ_ASAN_OPTIONS := quarantine_size_mb=64
FUZZ_OPTIONS := -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=512 -timeout=5 -max_len=65536 \
  -print_final_stats=1
# Each step of `make test`, in order; each builds its configuration once.
TEST_STEPS := test-release test-headers test-thread-safety test-asan test-tsan test-fuzz test-setup
# In `make test`, these builds run in the background at the lowest CPU
# priority from the start (scripts/prebuild.sh: they take only the CPU the
# steps in front leave idle); test-asan, test-tsan and test-fuzz wait for
# theirs. Run alone, those steps build as before.
PREBUILT := build-asan build-tsan build-fuzz
PREBUILD_DIR ?= build-prebuild
CTEST_SUMMARY := tests passed, [0-9]+ tests? failed out of|No tests were found

.PHONY: bootstrap bootstrap-test configure build cli $(PREBUILT) demo package bench bench-waiting bench-fairness bench-http bench-compare test $(TEST_STEPS) clean

bootstrap:
	bash scripts/bootstrap.sh

bootstrap-test:
	bash scripts/bootstrap.sh --test

# $(call cmake_configure,DIR,FLAGS): configure DIR with the generator above.
define cmake_configure
if [ -f $(1)/CMakeCache.txt ] && ! grep -qx 'CMAKE_GENERATOR:INTERNAL=$(GENERATOR)' $(1)/CMakeCache.txt; then \
  echo "make: $(1) was configured with another generator; configuring it afresh"; rm -rf $(1); \
fi; \
cmake -S . -B $(1) -G '$(GENERATOR)' $(2)
endef

configure: bootstrap
	$(call cmake_configure,$(BUILD_DIR),$(APP_FLAGS))

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

# The .deb holds the runtime install component only (cmake/Package.cmake);
# tests/package/deb_test.sh installs and removes it (ctest -L package, root).
package: cli
	cd $(BUILD_DIR) && cpack -G DEB
	ls -l $(BUILD_DIR)/runloom_*.deb

bench: cli
	$(RUNLOOM) bench --json

# 100,000 runs waiting at once without a worker (issue 23): half parked at
# timers, half waiting for signals; about 4 minutes.
bench-waiting: cli
	$(RUNLOOM) bench --waiting --runs 100000 --json

# Fair queues (issue 23): key B's 10 runs behind 1,000 and then 10,000 runs
# of key A, fair and FIFO; about a minute.
bench-fairness: cli
	$(RUNLOOM) bench --fairness --runs 1000 --executors 16 --json
	$(RUNLOOM) bench --fairness --runs 10000 --executors 16 --json

# Installs wrk, node and curl when missing (scripts/bootstrap.sh --bench).
bench-http: cli
	bash scripts/bootstrap.sh --bench
	RUNLOOM=$(RUNLOOM) bash bench/http/run.sh post
	RUNLOOM=$(RUNLOOM) bash bench/http/run.sh sse
	RUNLOOM=$(RUNLOOM) bash bench/http/run.sh stream

# Installs redis-server, postgresql-15, node and npm when missing
# (scripts/bootstrap.sh --bench); the npm packages are pinned (bench/compare/).
bench-compare: cli
	bash scripts/bootstrap.sh --bench
	SYNC_FULL=1 bash bench/compare/run.sh $(RUNLOOM) 3 10000
	bash bench/compare/run_pg.sh $(RUNLOOM) 3 10000

test: bootstrap-test
	rm -f $(BUILD_DIR)/test-steps.log
	bash scripts/prebuild.sh start $(PREBUILD_DIR) $(PREBUILT); \
	trap 'bash scripts/prebuild.sh stop $(PREBUILD_DIR)' EXIT; \
	for step in $(TEST_STEPS); do \
	  start=$$(date +%s); \
	  $(MAKE) --no-print-directory $$step; \
	  echo "$$step: $$(( $$(date +%s) - start )) s" >> $(BUILD_DIR)/test-steps.log; \
	done
	@echo "== fuzz: $(FUZZ_DIR) (libFuzzer+ASan+UBSan, $(FUZZ_SECONDS) s per target)"
	@grep -hE '^Done' $(FUZZ_DIR)/fuzz-*.log
	@echo "== ctest summary: $(BUILD_DIR) (Release: integration, campaign, model, browser, package, every-build), $(ASAN_DIR) (ASan+UBSan: unit, conformance, chaos, regression, every-build), $(TSAN_DIR) (TSan: label tsan, again)"
	@grep -hE '$(CTEST_SUMMARY)' $(BUILD_DIR)/ctest.log $(ASAN_DIR)/ctest.log $(TSAN_DIR)/ctest.log
	@echo "== time per step"
	@cat $(BUILD_DIR)/test-steps.log
	@echo "== builds run in the background at idle priority (scripts/prebuild.sh), overlapping the steps"
	@cat $(PREBUILD_DIR)/times.log

# --no-tests=error: a run that finds no test fails instead of passing silently.
test-release:
	$(call cmake_configure,$(BUILD_DIR),$(TEST_FLAGS))
	cmake --build $(BUILD_DIR) -j$(JOBS)
	ctest --test-dir $(BUILD_DIR) -LE '$(ASAN_ONLY_LABELS)' --output-on-failure --no-tests=error -j$(JOBS) 2>&1 | tee $(BUILD_DIR)/ctest.log

# Every public header compiles alone (cmake/CheckHeaders.cmake lists them).
test-headers:
	$(call cmake_configure,$(BUILD_DIR),$(TEST_FLAGS))
	cmake --build $(BUILD_DIR) --target checkheaders -j$(JOBS)

# Clang's thread-safety analysis, -Werror, over the translation units of
# build/ (its compile_commands.json), syntax only: no clang build directory.
# Test units that name no annotated lock, and public headers a checked unit
# compiled, are not checked again (scripts/thread_safety.py).
test-thread-safety:
	$(call cmake_configure,$(BUILD_DIR),$(TEST_FLAGS))
	python3 scripts/thread_safety.py $(BUILD_DIR) $(JOBS)

# The kill campaign (label `campaign`: worker processes SIGKILLed at random,
# about 1.5 minutes a backend in Release) runs in test-release only: a
# SIGKILLed process leaves ASan nothing to report, and it cost the ASan step
# minutes.
build-asan:
	$(call cmake_configure,$(ASAN_DIR),$(ASAN_FLAGS))
	cmake --build $(ASAN_DIR) --target asan_tests -j$(JOBS)

test-asan:
	bash scripts/prebuild.sh wait $(PREBUILD_DIR) build-asan
	$(MAKE) --no-print-directory build-asan
	UBSAN_OPTIONS="$${UBSAN_OPTIONS:-print_stacktrace=1}" \
	  ctest --test-dir $(ASAN_DIR) -L '$(ASAN_LABELS)' --output-on-failure --no-tests=error \
	    -j$(JOBS) 2>&1 | tee $(ASAN_DIR)/ctest.log

# Only the test binaries the TSan job runs (RUNLOOM_TSAN_TESTS in
# cmake/RunloomHelpers.cmake, ctest label `tsan`). runloom::Mutex is the
# TSan-visible stand-in there (include/runloom/mutex.h); tests/tsan.supp holds
# the suppressions, each for third-party internals only.
build-tsan:
	$(call cmake_configure,$(TSAN_DIR),$(TSAN_FLAGS))
	cmake --build $(TSAN_DIR) --target tsan_tests -j$(JOBS)

test-tsan:
	bash scripts/prebuild.sh wait $(PREBUILD_DIR) build-tsan
	$(MAKE) --no-print-directory build-tsan
	TSAN_OPTIONS="$${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1} suppressions=$(CURDIR)/tests/tsan.supp" \
	  ctest --test-dir $(TSAN_DIR) -L tsan --output-on-failure --no-tests=error -j$(JOBS) 2>&1 | tee $(TSAN_DIR)/ctest.log

# Each fuzz target runs on a copy of tests/fuzz/corpus/<target>/ in
# build-fuzz/, so what it finds never lands in the repository; a crash, a
# timeout or an out-of-memory stops make, leaving the input in
# build-fuzz/artifacts/<target>/ (fix it, then add the input to the corpus).
# The targets run side by side, one process each (libFuzzer uses one core):
# each still fuzzes FUZZ_SECONDS, and the step takes FUZZ_SECONDS once, not
# once per target.
build-fuzz:
	$(call cmake_configure,$(FUZZ_DIR),$(FUZZ_FLAGS))
	cmake --build $(FUZZ_DIR) --target $(FUZZ_TARGETS:%=%_fuzz) -j$(JOBS)

test-fuzz:
	bash scripts/prebuild.sh wait $(PREBUILD_DIR) build-fuzz
	$(MAKE) --no-print-directory build-fuzz
	pids=(); \
	for t in $(FUZZ_TARGETS); do \
	  rm -rf $(FUZZ_DIR)/corpus/$$t $(FUZZ_DIR)/artifacts/$$t; \
	  mkdir -p $(FUZZ_DIR)/corpus $(FUZZ_DIR)/artifacts/$$t; \
	  cp -r tests/fuzz/corpus/$$t $(FUZZ_DIR)/corpus/$$t; \
	  echo "== fuzz $$t for $(FUZZ_SECONDS) s (log: $(FUZZ_DIR)/fuzz-$$t.log)"; \
	  ASAN_OPTIONS="$${ASAN_OPTIONS:-$(FUZZ_ASAN_OPTIONS)}" \
	    UBSAN_OPTIONS="$${UBSAN_OPTIONS:-print_stacktrace=1}" ./$(FUZZ_DIR)/tests/fuzz/$${t}_fuzz \
	    $(FUZZ_OPTIONS) -artifact_prefix=$(FUZZ_DIR)/artifacts/$$t/ $(FUZZ_DIR)/corpus/$$t \
	    > $(FUZZ_DIR)/fuzz-$$t.log 2>&1 & \
	  pids+=($$!); \
	done; \
	i=0; failed=0; \
	for t in $(FUZZ_TARGETS); do \
	  if ! wait $${pids[$$i]}; then \
	    tail -n 60 $(FUZZ_DIR)/fuzz-$$t.log; \
	    echo "fuzz $$t: found a problem; input in $(FUZZ_DIR)/artifacts/$$t/"; \
	    failed=1; \
	  else \
	    grep -E '^(Done|stat::(number_of_executed_units|peak_rss_mb))' $(FUZZ_DIR)/fuzz-$$t.log; \
	  fi; \
	  i=$$((i + 1)); \
	done; \
	exit $$failed

# The README's first command in a fresh clone of HEAD, in a private mount
# namespace that hides the test-only tools (root only; CI is root).
test-setup:
	bash scripts/test-setup.sh $(BUILD_DIR)/setup-test

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR) $(FUZZ_DIR) $(PREBUILD_DIR)
