# The guides' commands, run as their readers would run them
# (tests/docs/doctest.py; tests/docs/README.md says how blocks are marked):
# docs/<guide> runs every marked block of README.md or docs/<guide>.md in a
# scratch directory of its own, in order, and checks the commands, flags
# and links of the file. docs/linked checks the commands, flags and links
# of the files the guides link but do not run (deploy/README.md,
# perf/report.md), and that no two of all these files share a sentence.
# docs/diagram: docs/architecture.svg shows what docs/architecture.dot
# says. Included from tests/CMakeLists.txt.
find_program(RDPS_DOCS_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT RDPS_DOCS_PYTHON)
  set(RDPS_DOCS_PYTHON /usr/bin/python3)
endif()
file(GLOB RDPS_GUIDES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/docs/*.md)
foreach(guide ${CMAKE_SOURCE_DIR}/README.md ${RDPS_GUIDES})
  get_filename_component(name ${guide} NAME_WE)
  add_test(NAME docs/${name}
    COMMAND ${RDPS_DOCS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/doctest.py
      --source ${CMAKE_SOURCE_DIR} --build ${CMAKE_BINARY_DIR} ${guide})
  set_tests_properties(docs/${name} PROPERTIES TIMEOUT 900)
endforeach()
add_test(NAME docs/linked
  COMMAND ${RDPS_DOCS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/doctest.py --flags-and-links
    --duplicates --source ${CMAKE_SOURCE_DIR} --build ${CMAKE_BINARY_DIR}
    ${CMAKE_SOURCE_DIR}/README.md ${RDPS_GUIDES}
    ${CMAKE_SOURCE_DIR}/deploy/README.md ${CMAKE_SOURCE_DIR}/perf/report.md)
set_tests_properties(docs/linked PROPERTIES TIMEOUT 300)
add_test(NAME docs/diagram
  COMMAND ${RDPS_DOCS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/diagram.py check ${CMAKE_SOURCE_DIR})
set_tests_properties(docs/diagram PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)
