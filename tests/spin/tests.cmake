# Model checking: transport/verbs_credits.pml (the verbs push protocol:
# credits, shared receive queue, session teardown) verified exhaustively with
# spin, plus controls that must fail. Included from tests/CMakeLists.txt.
# See tests/spin/README.md.
add_test(NAME spin/verbs_credits
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/spin/check.sh
          ${CMAKE_SOURCE_DIR}/transport/verbs_credits.pml ${CMAKE_BINARY_DIR}/spin/verbs_credits
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
set_tests_properties(spin/verbs_credits PROPERTIES
  # About 2 min of one core (6 min wall on a loaded 2-core host); pan holds
  # up to ~520 MB in the replace run.
  TIMEOUT 1500
  # check.sh exits 77 when spin is not installed.
  SKIP_RETURN_CODE 77)
