# The version lives in one place, project(VERSION) in CMakeLists.txt. From it:
# the public header runloom/version.h (installed with the other headers), the
# package's version (cmake/Package.cmake) and the CMake package's version
# file (cmake/Install.cmake). The commit is read at every build
# (cmake/WriteCommit.cmake) for `runloom --version`.
configure_file(${PROJECT_SOURCE_DIR}/cmake/version.h.in
               ${PROJECT_BINARY_DIR}/include/runloom/version.h @ONLY)
set(RUNLOOM_COMMIT_CC ${PROJECT_BINARY_DIR}/generated/build_commit.cc)
add_custom_target(runloom_build_commit
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DOUT=${RUNLOOM_COMMIT_CC}
          -P ${PROJECT_SOURCE_DIR}/cmake/WriteCommit.cmake
  BYPRODUCTS ${RUNLOOM_COMMIT_CC}
  COMMENT "Reading the source tree's commit"
  VERBATIM)
