# `cmake --install build --prefix DIR` (and `make install`): everything under DIR.
#   bin/kiln                                 the command line
#   lib/libkiln.so.0, lib/libkiln_runtime.so.0  the C API (include/kiln/kiln.h)
#   include/kiln/kiln.h
#   lib/cmake/kiln/                          find_package(kiln CONFIG): kiln::kiln, kiln::runtime
#   lib/pkgconfig/kiln.pc, kiln_runtime.pc
#   the Python package (python/CMakeLists.txt)
# tests/embed/install_test.sh installs into a temporary prefix and builds examples/c against it.
include(CMakePackageConfigHelpers)

set_target_properties(kiln_shared PROPERTIES EXPORT_NAME kiln)
set_target_properties(kiln_runtime_shared PROPERTIES EXPORT_NAME runtime)
set_target_properties(kiln_c_headers PROPERTIES EXPORT_NAME headers)
install(TARGETS kiln_shared kiln_runtime_shared kiln_c_headers EXPORT kilnTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/kiln/kiln.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln)
install(TARGETS kiln RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(KILN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${KILN_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kilnConfig.cmake.in
  ${CMAKE_BINARY_DIR}/install/kilnConfig.cmake INSTALL_DESTINATION ${KILN_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/install/kilnConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/install/kilnConfig.cmake
  ${CMAKE_BINARY_DIR}/install/kilnConfigVersion.cmake DESTINATION ${KILN_CMAKE_DIR})

# Relocatable: the prefix is found from the .pc file's own place, so `--prefix DIR` at install
# time works.
file(RELATIVE_PATH KILN_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
set(KILN_PC_PREFIX "\${pcfiledir}/${KILN_PC_TO_PREFIX}")
foreach(pc kiln kiln_runtime)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${CMAKE_BINARY_DIR}/install/${pc}.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/install/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()

# A Debian package of the same tree: cpack -G DEB --config build/CPackConfig.cmake
set(CPACK_PACKAGE_NAME kiln)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "kiln developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "kiln: ahead-of-time compiler and runtime for ONNX models")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
include(CPack)
