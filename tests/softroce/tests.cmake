# Soft-RoCE tests: real verbs/rdma_cm programs in qemu guests running Debian's
# kernel with rdma_rxe (this host's kernel has no RDMA stack). Included from
# tests/CMakeLists.txt. See tests/softroce/README.md.
set(RDPS_SOFTROCE_DIR ${CMAKE_SOURCE_DIR}/tests/softroce)

add_test(NAME softroce/smoke
  COMMAND bash ${RDPS_SOFTROCE_DIR}/smoke.sh ${CMAKE_BINARY_DIR}/softroce/smoke
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
set_tests_properties(softroce/smoke PROPERTIES
  LABELS softroce
  # The harness kills its guests at 75 s; this is only the last line of defence.
  TIMEOUT 120
  # guest.sh exits 77 when qemu, the kernel image or busybox-static is missing.
  SKIP_RETURN_CODE 77
  # Two TCG guests use both cores of a 2-core host; do not overlap other tests.
  PROCESSORS 2
  # The initramfs is built once per kernel and reused by every softroce test.
  ENVIRONMENT "RDPS_SOFTROCE_CACHE=${CMAKE_BINARY_DIR}/softroce-cache")

# The verbs suite: a Criterion program run inside the guests by verbs.sh
# (not registered on its own: this host has no RDMA device).
add_library(softroce_guest_common STATIC ${RDPS_SOFTROCE_DIR}/guest_common.c)
target_link_libraries(softroce_guest_common PUBLIC rdps_all rdps_test_support)
add_executable(softroce_guest_verbs ${RDPS_SOFTROCE_DIR}/guest_verbs.c)
target_link_libraries(softroce_guest_verbs PRIVATE softroce_guest_common)
add_dependencies(softroce_guest_verbs rdps integration_test_cluster integration_test_faults
  integration_test_badinput integration_test_auth
  kvstore_test_server_threads integration_test_tables softroce_guest_scale
  softroce_guest_sessions softroce_guest_graph graph_test_graph graph_test_graph_hetero)
# 64 clients over one receive queue, clients killed with pushes in flight.
add_executable(softroce_guest_scale ${RDPS_SOFTROCE_DIR}/guest_scale.c)
target_link_libraries(softroce_guest_scale PRIVATE softroce_guest_common)
# Session tokens and the binding of queue pairs to control connections.
add_executable(softroce_guest_sessions ${RDPS_SOFTROCE_DIR}/guest_sessions.c)
target_link_libraries(softroce_guest_sessions PRIVATE softroce_guest_common)
# One-sided neighbour sampling with the graph's servers stopped (issue 19).
add_executable(softroce_guest_graph ${RDPS_SOFTROCE_DIR}/guest_graph.c)
target_link_libraries(softroce_guest_graph PRIVATE softroce_guest_common)

add_test(NAME softroce/verbs
  COMMAND bash ${RDPS_SOFTROCE_DIR}/verbs.sh ${CMAKE_BINARY_DIR} ${CMAKE_BINARY_DIR}/softroce/verbs
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
set_tests_properties(softroce/verbs PROPERTIES
  LABELS softroce
  TIMEOUT 1500
  SKIP_RETURN_CODE 77
  PROCESSORS 2
  ENVIRONMENT "RDPS_SOFTROCE_CACHE=${CMAKE_BINARY_DIR}/softroce-cache")

# One job over two hosts: each guest runs its machine with rdps launch
# --backend local --machine M over verbs; MRR compared with a host launch.
add_test(NAME softroce/launch
  COMMAND bash ${RDPS_SOFTROCE_DIR}/launch.sh ${CMAKE_BINARY_DIR} ${CMAKE_BINARY_DIR}/softroce/launch
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
set_tests_properties(softroce/launch PROPERTIES
  LABELS "softroce;deploy"
  TIMEOUT 900
  SKIP_RETURN_CODE 77
  PROCESSORS 2
  ENVIRONMENT "RDPS_SOFTROCE_CACHE=${CMAKE_BINARY_DIR}/softroce-cache")
