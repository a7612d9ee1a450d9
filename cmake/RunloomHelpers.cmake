# runloom_cc_library(NAME n HDRS ... SRCS ... DEPS ... [TESTONLY])
# Creates target runloom_<n> and alias runloom::<n>; always depend on the alias.
function(runloom_cc_library)
  cmake_parse_arguments(RL "TESTONLY" "NAME" "HDRS;SRCS;DEPS" ${ARGN})
  set(_t runloom_${RL_NAME})
  if(RL_SRCS)
    add_library(${_t} STATIC ${RL_SRCS} ${RL_HDRS})
    # Only include/ is public (STYLE.md §1). Every runloom target and test
    # sees src/ privately, so modules still include each other by "module/x.h".
    target_include_directories(${_t} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                               $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include> $<INSTALL_INTERFACE:include>
                               PRIVATE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${_t} PUBLIC ${RL_DEPS})
  else()
    add_library(${_t} INTERFACE)
    target_include_directories(${_t} INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                               $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include> $<INSTALL_INTERFACE:include>)
    target_link_libraries(${_t} INTERFACE ${RL_DEPS})
  endif()
  add_library(runloom::${RL_NAME} ALIAS ${_t})
endfunction()

# The test binaries the ThreadSanitizer job builds and runs (`make test-tsan`:
# the `tsan_tests` target; in a Tsan build their tests carry the ctest label
# `tsan`). Add a test here by name.
set(RUNLOOM_TSAN_TESTS engine_test decisions_test chaos_test dead_letter_test store_write_queue_test
    event_bus_test store_change_watcher_test api_test)
if(RUNLOOM_BUILD_TESTS)
  add_custom_target(tsan_tests)
  # `make test-asan` builds only the test binaries it runs: those labelled
  # unit, conformance or chaos (and what they need, the CLI for the chaos
  # tests that start it).
  add_custom_target(asan_tests)
endif()

# One precompiled header for every test binary (each compiles as one unity
# unit): the standard library, GoogleTest and GoogleMock, nlohmann/json and
# Abseil's strings and status, parsed once per build directory instead of
# once per test binary (~2.7 s of engine_rules_test's 14.4 s unit in
# Release). GCC uses a precompiled header only when the macros it tested
# are defined alike, and -Winvalid-pch with -Werror turns a mismatch into an
# error: so it holds only third-party and standard headers (no runloom
# header: RUNLOOM_TSAN changes runloom/mutex.h), the test binaries define
# _FILE_OFFSET_BITS=64 alike (libpq's flags bring it to some of them; on
# 64-bit Linux it changes nothing) and the donor below takes the test
# binaries' flags (runloom_cc_test). The top-level CMakeLists.txt calls this
# once GoogleTest is found.
function(runloom_test_pch)
  # CONFIGURE writes only when the text differs: a reconfigure leaves the
  # file's time alone and so does not recompile it.
  file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/test_pch/pch.cc
       CONTENT "// The precompiled header's own unit (cmake/RunloomHelpers.cmake).\n")
  add_library(runloom_test_pch OBJECT ${PROJECT_BINARY_DIR}/test_pch/pch.cc)
  target_link_libraries(runloom_test_pch PRIVATE GTest::gtest GTest::gmock)
  runloom_test_flags(runloom_test_pch)
  target_precompile_headers(runloom_test_pch PRIVATE
    <algorithm> <atomic> <chrono> <filesystem> <fstream> <functional> <map> <memory> <optional>
    <set> <sstream> <string> <string_view> <thread> <utility> <vector>
    <gtest/gtest.h> <gmock/gmock.h> <nlohmann/json.hpp>
    <absl/status/status.h> <absl/status/statusor.h> <absl/strings/str_cat.h>
    <absl/strings/match.h> <absl/strings/str_join.h>)
endfunction()

# The compile flags every test binary's unit has, and the precompiled
# header's donor with it.
function(runloom_test_flags target)
  runloom_unoptimized_test_code(${target})
  # Where tests find the sources (examples/) and the CLI binary; the
  # environment variables of the same names override these.
  target_compile_definitions(${target} PRIVATE
    RUNLOOM_SOURCE_DIR_DEFAULT="${PROJECT_SOURCE_DIR}"
    RUNLOOM_BINARY_DEFAULT="${PROJECT_BINARY_DIR}/runloom"
    _FILE_OFFSET_BITS=64)
endfunction()

# After every target exists (the top-level CMakeLists.txt calls it): what the
# ASan run's tests start besides their own binaries.
function(runloom_asan_extras)
  if(TARGET asan_tests)
    add_dependencies(asan_tests runloom events_dump)
  endif()
endfunction()
# Where the `servers` fixture keeps the test servers' data and URLs.
set(RUNLOOM_TEST_SERVERS_DIR ${PROJECT_BINARY_DIR}/test-servers)

# Test bodies are compiled without optimization (after the build type's -O,
# so this -O0 wins); the engine code they call keeps the build type's. Most
# of a test binary's compile time was optimizing GoogleTest's and the tests'
# own code (store_conformance_test's unit: 40 s at -O3, 18 s at -O0), which
# runs in no benchmark. Sanitizers and warnings apply as before.
function(runloom_unoptimized_test_code target)
  target_compile_options(${target} PRIVATE -O0)
endfunction()

# runloom_cc_test(NAME n SRCS ... DEPS ... LABELS ... [SERVERS])
# SERVERS: the tests use the test PostgreSQL and Redis (src/testing/test_servers.h).
# One GoogleTest binary registered with ctest via gtest_discover_tests so the
# ctest summary counts every TEST, not every binary.
function(runloom_cc_test)
  if(NOT RUNLOOM_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(RL "SERVERS" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  set(_t ${RL_NAME})
  # The labels `make test-asan` runs (Makefile: ASAN_LABELS); of them,
  # `every-build` also runs in Release: tests whose expectations differ by
  # build type (crash points and event checks compiled out, the simulator's
  # full seed campaign).
  set(_asan_only FALSE)
  if(RL_LABELS MATCHES "^(unit|conformance|chaos|regression)$")
    set(_asan_only TRUE)
  endif()
  set(_asan_set ${_asan_only})
  if(RL_LABELS STREQUAL "every-build")
    set(_asan_set TRUE)
  endif()
  # RUNLOOM_SKIP_ASAN_TESTS: built only on request, never registered with ctest.
  set(_left_out FALSE)
  if(_asan_only AND RUNLOOM_SKIP_ASAN_TESTS)
    set(_left_out TRUE)
  endif()
  if(_left_out)
    add_executable(${_t} EXCLUDE_FROM_ALL ${RL_SRCS})
  else()
    add_executable(${_t} ${RL_SRCS})
  endif()
  target_include_directories(${_t} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(${_t} PRIVATE ${RL_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  runloom_test_flags(${_t})
  target_precompile_headers(${_t} REUSE_FROM runloom_test_pch)
  if(_asan_set)
    add_dependencies(asan_tests ${_t})
  endif()
  if(_left_out)
    return()
  endif()
  if(_t IN_LIST RUNLOOM_TSAN_TESTS)
    add_dependencies(tsan_tests ${_t})
    # One label only: gtest_discover_tests (CMake 3.25) splits a list of labels.
    if(CMAKE_BUILD_TYPE STREQUAL "Tsan")
      set(RL_LABELS tsan)
    endif()
  endif()
  if(NOT RL_TIMEOUT)
    set(RL_TIMEOUT 120)
  endif()
  include(GoogleTest)
  # Listing a binary's tests takes well under a second, but `make test`
  # builds the sanitizer configurations at idle CPU priority
  # (scripts/prebuild.sh), where a listing can wait minutes for a core while
  # the step in front keeps both busy (the thread-safety check: ~3 minutes).
  set(_discovery_timeout 300)
  if(RL_SERVERS)
    # Needs the PostgreSQL and Redis that the `servers` fixture starts
    # (tests/CMakeLists.txt); RUNLOOM_TEST_SERVERS tells it where they are.
    gtest_discover_tests(${_t}
      PROPERTIES LABELS "${RL_LABELS}" TIMEOUT ${RL_TIMEOUT} FIXTURES_REQUIRED servers
        ENVIRONMENT "RUNLOOM_TEST_SERVERS=${RUNLOOM_TEST_SERVERS_DIR}"
      DISCOVERY_TIMEOUT ${_discovery_timeout})
  else()
    gtest_discover_tests(${_t}
      PROPERTIES LABELS "${RL_LABELS}" TIMEOUT ${RL_TIMEOUT}
      DISCOVERY_TIMEOUT ${_discovery_timeout})
  endif()
endfunction()
