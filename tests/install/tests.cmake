# What cmake --install ships, used from a fresh prefix (tests/install/run.sh):
# install/package builds a C client with pkg-config and one with
# find_package(rdps) and runs both against the installed rdps server;
# install/abi checks that librdps.so.0 exports exactly the public headers'
# C API; install/man that every exported function has its section-3 page
# and "man 3 rdps_client_pull" shows it. Each installs the build tree as it is (ctest runs after a build).
# Included from tests/CMakeLists.txt.
foreach(check package abi man)
  add_test(NAME install/${check}
    COMMAND bash ${CMAKE_SOURCE_DIR}/tests/install/run.sh ${check} ${CMAKE_BINARY_DIR}
      ${CMAKE_BINARY_DIR}/install-test/${check})
  set_tests_properties(install/${check} PROPERTIES TIMEOUT 120)
endforeach()
