# Model checking: transport/verbs_credits.pml (the verbs push protocol:
# credits, shared receive queue, session teardown) verified exhaustively with
# spin, plus controls that must fail. Included from tests/CMakeLists.txt.
# See tests/spin/README.md.
add_test(NAME spin/verbs_credits
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/spin/check.sh
          ${CMAKE_SOURCE_DIR}/transport/verbs_credits.pml ${CMAKE_BINARY_DIR}/spin/verbs_credits
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
set_tests_properties(spin/verbs_credits PROPERTIES
  # About 40 s of one core; pan holds up to ~350 MB.
  TIMEOUT 600
  # check.sh exits 77 when spin is not installed.
  SKIP_RETURN_CODE 77)
