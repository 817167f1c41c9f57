# Installs rdps.pc, written for the prefix being installed into: run by
# cmake --install (install(SCRIPT) in CMakeLists.txt) after configure_file
# filled in the @...@ values of the build. CMAKE_INSTALL_PREFIX is the
# install's own (--prefix P), so rdps.pc names P as every .pc names its
# prefix; install directories given absolute are kept as they are. The
# file is written under a name of its own per prefix: two installs of one
# build into two prefixes at once (ctest -j) do not share it.
set(RDPS_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(RDPS_PC_LIBDIR "@CMAKE_INSTALL_LIBDIR@")
set(RDPS_PC_INCLUDEDIR "@CMAKE_INSTALL_INCLUDEDIR@")
foreach(kind LIBDIR INCLUDEDIR)
  if(NOT IS_ABSOLUTE "${RDPS_PC_${kind}}")
    set(RDPS_PC_${kind} "\${prefix}/${RDPS_PC_${kind}}")
  endif()
endforeach()
set(PROJECT_VERSION "@PROJECT_VERSION@")
set(RDPS_PC_REQUIRES "@RDPS_PC_REQUIRES@")
set(RDPS_PC_LIBS "@RDPS_PC_LIBS@")
string(MD5 tag "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(pc "@CMAKE_BINARY_DIR@/pkgconfig/${tag}/rdps.pc")
configure_file("@CMAKE_SOURCE_DIR@/cmake/rdps.pc.in" "${pc}" @ONLY)
set(dir "@CMAKE_INSTALL_LIBDIR@/pkgconfig")
if(NOT IS_ABSOLUTE "${dir}")
  set(dir "${CMAKE_INSTALL_PREFIX}/${dir}")
endif()
file(INSTALL DESTINATION "${dir}" TYPE FILE FILES "${pc}")
