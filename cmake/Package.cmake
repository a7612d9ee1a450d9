# The Debian package (`make package`, cpack in the build directory):
# build/runloom_<version>_<arch>.deb with the `runtime` install component only:
# the runloom binary, README.md, CHANGELOG.md, docs/ and the copyright file, the example
# workflows, the systemd units and an example /etc/runloom/config.yaml; the
# maintainer scripts in packaging/debian/ add the `runloom` system user,
# /var/lib/runloom and /etc/runloom/runloom.env. docs/operations.md,
# "Installing the Debian package"; tests/package/deb_test.sh installs it.
#
# `cmake --install BUILD --prefix DIR` installs the binary, docs and examples
# under DIR. The units and /etc/runloom/config.yaml name fixed paths
# (/usr/bin/runloom, /var/lib/runloom), so they are the package's alone: they
# go in only with the runtime component asked for by name (cpack does;
# `cmake --install BUILD --component runtime` writes them to /lib and /etc).

include(GNUInstallDirs)

install(TARGETS runloom RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)

set(_runloom_docdir ${CMAKE_INSTALL_DATADIR}/doc/runloom)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/CHANGELOG.md
              ${PROJECT_SOURCE_DIR}/packaging/debian/copyright
        DESTINATION ${_runloom_docdir} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs DESTINATION ${_runloom_docdir} COMPONENT runtime)

# What the example workflows run: the YAML files and the exec steps' python3
# scripts beside them (a step's cwd is its workflow file's directory). Not the
# actions server's C++ sources (examples/triage.yaml wants that server running).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DATADIR}/runloom/examples
        COMPONENT runtime USE_SOURCE_PERMISSIONS
        FILES_MATCHING PATTERN "*.yaml" PATTERN "*.py"
        PATTERN actions_server EXCLUDE PATTERN __pycache__ EXCLUDE)

install(FILES ${PROJECT_SOURCE_DIR}/packaging/systemd/runloom-serve.service
              ${PROJECT_SOURCE_DIR}/packaging/systemd/runloom-worker@.service
        DESTINATION /lib/systemd/system COMPONENT runtime EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/config.yaml DESTINATION /etc/runloom
        COMPONENT runtime EXCLUDE_FROM_ALL)

# --- CPack: one .deb of the runtime component ---------------------------------
# Other components (headers, static libraries, CMake package files: `dev`) are
# never packaged here: cpack installs the runtime component alone.
set(CPACK_GENERATOR DEB)
set(CPACK_INSTALL_CMAKE_PROJECTS "${PROJECT_BINARY_DIR};${PROJECT_NAME};runtime;/")
set(CPACK_PACKAGE_NAME runloom)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "durable run engine for LLM-agent pipelines")
# The synopsis is the summary above; this is the extended description (one
# string: CMake would join several with ';').
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "\
runloom runs pipelines described in YAML (subprocesses, model calls, loops,
parallel branches, approval gates) and records every run in a store, so a
run resumes after its process dies. This package holds the runloom command,
its documentation and examples, and systemd units for `runloom serve` (HTTP
API and web UI) and `runloom worker` on an SQLite database in
/var/lib/runloom.")
set(RUNLOOM_PACKAGE_MAINTAINER "runloom maintainers <maintainers@users.noreply.a-seed-c12b917c.example>"
    CACHE STRING "The Debian package's Maintainer field")
set(CPACK_PACKAGE_CONTACT "${RUNLOOM_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${RUNLOOM_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# dpkg-shlibdeps adds the shared libraries' packages to these.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3")
execute_process(COMMAND dpkg --print-architecture OUTPUT_VARIABLE _runloom_deb_arch
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT _runloom_deb_arch)
  set(_runloom_deb_arch amd64)
endif()
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${_runloom_deb_arch})
set(CPACK_DEBIAN_FILE_NAME "runloom_${PROJECT_VERSION}_${_runloom_deb_arch}.deb")
# The .deb lands in the build directory, wherever cpack runs from.
set(CPACK_PACKAGE_DIRECTORY "${PROJECT_BINARY_DIR}")
# conffiles lists /etc/runloom/config.yaml: an upgrade keeps the administrator's
# edits. Scripts 0755, other control files 0644 (dpkg's rule).
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${PROJECT_SOURCE_DIR}/packaging/debian/conffiles"
    "${PROJECT_SOURCE_DIR}/packaging/debian/postinst"
    "${PROJECT_SOURCE_DIR}/packaging/debian/prerm"
    "${PROJECT_SOURCE_DIR}/packaging/debian/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
