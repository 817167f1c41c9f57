# The integration suites that run their servers as processes over one
# network transport (the first of RDPS_TEST_TRANSPORTS, tcp by default),
# once more over ofi: libfabric's tcp;ofi_rxm provider on loopback
# (ofi_env.h sets FI_PROVIDER unless it is set). Each test skips where
# libfabric has no such provider. test_cluster needs no entry: its default
# list of transports takes ofi in where it is available.
foreach(name test_faults test_auth test_badinput)
  add_test(NAME integration/${name}/ofi COMMAND integration_${name} --jobs 1 --timeout 120)
  get_test_property(integration/${name} LABELS labels)
  get_test_property(integration/${name} TIMEOUT tmo)
  set_tests_properties(integration/${name}/ofi PROPERTIES
    ENVIRONMENT "RDPS_TEST_TRANSPORTS=ofi" TIMEOUT ${tmo})
  if(labels)
    set_tests_properties(integration/${name}/ofi PROPERTIES LABELS "${labels}")
  endif()
endforeach()
