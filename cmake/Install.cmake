# `cmake --install` (COMPONENT dev): the public headers, the static
# libraries and the CMake package runloomConfig.cmake with its version file,
# for find_package(runloom CONFIG COMPONENTS ...) in another project, and a
# pkg-config file for the embedded engine (docs/operations.md "Embedding
# runloom"; examples/embed/ is such a project; tests/install/ builds it).
#
# One export set per find_package component, each with only its own
# dependencies (runloomConfig.cmake finds them):
#   engine     the engine on SQLite (runloom::engine_sqlite): SQLite, Abseil,
#              yaml-cpp, nlohmann-json, spdlog/fmt, OpenSSL's libcrypto
#              (digests), prometheus-cpp core (metrics)
#   redis      Redis Streams and the Redis LLM cap board: + hiredis
#   postgres   the PostgreSQL backend (with or without a Redis queue;
#              runloom::backends opens every URL form): + libpq, + redis
#   providers  the model providers over HTTP, the http step and the
#              configuration file (runloom/config.h): + libcurl
#   http       the HTTP API server (runloom/http_server.h): + Boost headers
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(RUNLOOM_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/runloom)
set(RUNLOOM_COMPONENT_engine core schedule workflow llm events event_bus store transport steps engine
    backend store_sqlite backend_sqlite engine_sqlite)
set(RUNLOOM_COMPONENT_redis redis redis_transport llm_redis_cap_board)
set(RUNLOOM_COMPONENT_postgres store_postgres backend_postgres backends)
set(RUNLOOM_COMPONENT_providers net llm_http steps_http providers)
set(RUNLOOM_COMPONENT_http auth wire web_assets api)
set(RUNLOOM_COMPONENTS engine redis postgres providers http)

foreach(_c IN LISTS RUNLOOM_COMPONENTS)
  set(_targets "")
  foreach(_n IN LISTS RUNLOOM_COMPONENT_${_c})
    # Imported as runloom::<name>, the alias the build uses.
    set_target_properties(runloom_${_n} PROPERTIES EXPORT_NAME ${_n})
    list(APPEND _targets runloom_${_n})
  endforeach()
  install(TARGETS ${_targets} EXPORT runloom-${_c}-targets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT runloom-${_c}-targets NAMESPACE runloom:: DESTINATION ${RUNLOOM_INSTALL_CMAKEDIR}
          COMPONENT dev)
endforeach()

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/runloom ${PROJECT_BINARY_DIR}/include/runloom
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev FILES_MATCHING PATTERN "*.h")

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/runloomConfig.cmake.in
  ${PROJECT_BINARY_DIR}/runloomConfig.cmake INSTALL_DESTINATION ${RUNLOOM_INSTALL_CMAKEDIR})
# Same major version: compatible (docs/operations.md "Versions and compatibility").
write_basic_package_version_file(${PROJECT_BINARY_DIR}/runloomConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/runloomConfig.cmake ${PROJECT_BINARY_DIR}/runloomConfigVersion.cmake
        DESTINATION ${RUNLOOM_INSTALL_CMAKEDIR} COMPONENT dev)

# pkg-config: the embedded engine, libraries in link order (each before what
# it uses), its dependencies by their own .pc files.
set(RUNLOOM_PC_LIBS "")
foreach(_n engine backend_sqlite backend store_sqlite store steps llm events event_bus
           transport workflow schedule core)
  string(APPEND RUNLOOM_PC_LIBS " -lrunloom_${_n}")
endforeach()
# From <prefix>/<libdir>/pkgconfig back up to <prefix>.
file(RELATIVE_PATH RUNLOOM_PC_UP /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
configure_file(${PROJECT_SOURCE_DIR}/cmake/runloom.pc.in ${PROJECT_BINARY_DIR}/runloom.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/runloom.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT dev)
