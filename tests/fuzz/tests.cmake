# libFuzzer targets (see tests/fuzz/README.md). They need clang, so run.sh
# builds them in a configuration of their own (BUILD/fuzz), then runs each
# of the 7 for a fixed number of inputs, 20 s at most (two at a time, fixed
# seeds) and replays
# tests/fuzz/crashes/. Fails on any crash, sanitizer report or FUZZ_CHECK;
# skipped (77) without clang.
# Included from tests/CMakeLists.txt.
add_test(NAME fuzz/smoke
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/fuzz/run.sh ${CMAKE_BINARY_DIR}/fuzz 20
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
set_tests_properties(fuzz/smoke PROPERTIES
  LABELS faults
  # About 2.5 minutes: the build (~1 min) and four rounds of 20 s; the
  # bound leaves room for a loaded machine.
  TIMEOUT 600
  SKIP_RETURN_CODE 77
  # Two fuzzers at a time use both cores of a 2-core host.
  PROCESSORS 2)
