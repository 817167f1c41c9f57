# The libfabric shim (ofi_shim.c, an LD_PRELOAD library: what rdps asks of
# libfabric, counted, and efa's answers modelled) and the suite that runs
# under it (ofi_shim_suite.c). Included from tests/CMakeLists.txt.
add_library(rdps_ofi_shim MODULE ${CMAKE_CURRENT_LIST_DIR}/ofi_shim.c)
target_link_libraries(rdps_ofi_shim PRIVATE PkgConfig::FABRIC ${IBVERBS_LIB} ${CMAKE_DL_LIBS})
set_target_properties(rdps_ofi_shim PROPERTIES PREFIX "lib" OUTPUT_NAME rdps_ofi_shim
  C_VISIBILITY_PRESET hidden)
add_executable(transport_ofi_shim_suite ${CMAKE_CURRENT_LIST_DIR}/ofi_shim_suite.c)
target_link_libraries(transport_ofi_shim_suite PRIVATE rdps_all rdps_test_support ${CMAKE_DL_LIBS})
add_dependencies(transport_ofi_shim_suite rdps_ofi_shim rdps)
add_test(NAME transport/ofi_shim COMMAND transport_ofi_shim_suite --jobs 1 --timeout 120)
set_tests_properties(transport/ofi_shim PROPERTIES
  ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:rdps_ofi_shim>"
  TIMEOUT 600)

# A dropped table's late one-sided reads (drop_suite.c): servers and clients
# of the public API, so it links every module. Over ofi here; over verbs in
# the soft-RoCE guest (tests/softroce/verbs.sh).
add_executable(transport_drop_suite ${CMAKE_CURRENT_LIST_DIR}/drop_suite.c)
target_link_libraries(transport_drop_suite PRIVATE rdps_all rdps_test_support)
add_test(NAME transport/drop COMMAND transport_drop_suite --jobs 1 --timeout 180)
set_tests_properties(transport/drop PROPERTIES TIMEOUT 400)
