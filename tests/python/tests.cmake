# The Python package (python/rdps) under pytest, in the venv of
# deploy/install-venv.sh ($RDPS_VENV, default /opt/rdps-venv: Debian's
# python3 with its python3-numpy, python3-torch, python3-cffi, python3-pytest,
# plus PyPI's DGL), so the tests that need DGL run against the real one (and
# fail, not skip, if it is missing: RDPS_REQUIRE_DGL). Without the venv, they
# run with Debian's python3 and the DGL tests are skipped (a configure warning
# says so). Included from tests/CMakeLists.txt.
#   python/api      the API over inproc and tcp, rdps launch --exec, the CLI
#                   changes, the cffi declarations against the headers
#   python/example  examples/transe_wordnet.py standalone and distributed
#   python/gnn      examples/wordnet_gnn.py: GraphSAGE standalone and distributed,
#                   against an MLP; RGCN
#   python/install  the package as cmake --install puts it, on its library;
#                   pip install ./python into a fresh venv
#   python/dgl      examples/dgl/: DGL-style scripts with real DGL, standalone
#                   and under rdps launch
if(NOT DEFINED RDPS_PYTHON)
  # Debian's interpreter: the one with python3-torch and friends (a python3
  # earlier in PATH, e.g. pyenv's, has none of them).
  if(EXISTS /usr/bin/python3)
    set(RDPS_PYTHON /usr/bin/python3 CACHE FILEPATH "Python for the package's tests and site dir")
  else()
    find_program(RDPS_PYTHON python3)
  endif()
endif()
if(NOT DEFINED RDPS_TEST_PYTHON)
  if(DEFINED ENV{RDPS_VENV})
    set(_venv $ENV{RDPS_VENV})
  else()
    set(_venv /opt/rdps-venv)
  endif()
  if(EXISTS ${_venv}/bin/python)
    set(RDPS_TEST_PYTHON ${_venv}/bin/python CACHE FILEPATH
      "Python of the package's tests (the venv with DGL)")
  else()
    message(WARNING "no venv at ${_venv} (deploy/install-venv.sh makes it): the Python "
      "tests run with ${RDPS_PYTHON}, and those that need DGL are skipped")
    set(RDPS_TEST_PYTHON ${RDPS_PYTHON})
  endif()
endif()
if(RDPS_TEST_PYTHON STREQUAL RDPS_PYTHON)
  set(RDPS_REQUIRE_DGL 0)
else()
  set(RDPS_REQUIRE_DGL 1)
endif()
set(RDPS_PYTHON_TEST_ENV
  "RDPS_REQUIRE_DGL=${RDPS_REQUIRE_DGL}"
  "DGLBACKEND=pytorch"
  "RDPS_LIBRARY=${CMAKE_BINARY_DIR}/librdps.so.0"
  "RDPS_BIN=${CMAKE_BINARY_DIR}/rdps"
  "RDPS_BUILD_DIR=${CMAKE_BINARY_DIR}"
  "PYTHONPATH=${CMAKE_SOURCE_DIR}/python"
  "PYTHONDONTWRITEBYTECODE=1"
  "OPENBLAS_NUM_THREADS=1")
if(RDPS_SANITIZE)
  # librdps.so is built with ASan+UBSan (tests/run.sh's build-asan), the
  # interpreter is not: the ASan runtime must be the first library of the
  # process, and libstdc++ loaded with it (RDPS_ASAN_PRELOAD, CMakeLists.txt).
  # The interpreter frees little at exit (torch less), so no leak check here
  # (the C suites keep theirs); any other report stops the test. Processes
  # the tests start (rdps servers, launched workers) inherit both.
  # RDPS_SANITIZED: conftest.py turns DGL's libxsmm kernels off (their
  # aligned_alloc sizes are refused by ASan).
  list(APPEND RDPS_PYTHON_TEST_ENV
    "RDPS_SANITIZED=1"
    "LD_PRELOAD=${RDPS_ASAN_PRELOAD}"
    "ASAN_OPTIONS=detect_leaks=0"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
endif()
file(GLOB RDPS_PY_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/test_*.py)
set(RDPS_PY_SUITE_example ${CMAKE_CURRENT_LIST_DIR}/test_example.py)
set(RDPS_PY_SUITE_install ${CMAKE_CURRENT_LIST_DIR}/test_install.py)
set(RDPS_PY_SUITE_gnn ${CMAKE_CURRENT_LIST_DIR}/test_gnn.py)
set(RDPS_PY_SUITE_dgl ${CMAKE_CURRENT_LIST_DIR}/test_dgl_examples.py)
set(RDPS_PY_SUITE_api ${RDPS_PY_TESTS})
list(REMOVE_ITEM RDPS_PY_SUITE_api ${RDPS_PY_SUITE_example} ${RDPS_PY_SUITE_install}
  ${RDPS_PY_SUITE_gnn} ${RDPS_PY_SUITE_dgl})
foreach(suite api example install gnn dgl)
  add_test(NAME python/${suite}
    COMMAND ${RDPS_TEST_PYTHON} -m pytest -q -p no:cacheprovider -rs ${RDPS_PY_SUITE_${suite}})
  set_tests_properties(python/${suite} PROPERTIES
    ENVIRONMENT "${RDPS_PYTHON_TEST_ENV}" TIMEOUT 900
    WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR})
endforeach()
# GraphSAGE 20 epochs twice, an MLP and RGCN: 815 s on the 2 cores under a
# load average of 13-23 (other suites' qemu guests); 900 s was too tight.
set_tests_properties(python/gnn PROPERTIES TIMEOUT 1500)
