# The C++ package of `cmake --install BUILD --prefix PREFIX`: static libraries, the headers under
# PREFIX/include/lowbit (included as "emulation/format.hpp", as in this tree), and
# PREFIX/lib/cmake/lowbit/lowbit-config.cmake exporting lowbit::emulation, lowbit::numerics and,
# in builds with the CUDA kernels, lowbit::kernels and lowbit::sage2 (liblowbit_sage2.so, the C interface
# of kernels/attention/lowbit_sage2.h). A consumer: find_package(lowbit CONFIG REQUIRED)
# and target_link_libraries(app PRIVATE lowbit::emulation).
include(CMakePackageConfigHelpers)

set(lowbit_installed_targets lowbit_emulation lowbit_numerics)
set_target_properties(lowbit_emulation PROPERTIES EXPORT_NAME emulation)
set_target_properties(lowbit_numerics PROPERTIES EXPORT_NAME numerics)
set(lowbit_header_dirs emulation numerics)
if(LOWBIT_HAVE_KERNELS)
  list(APPEND lowbit_installed_targets lowbit_kernels lowbit_sage2)
  set_target_properties(lowbit_kernels PROPERTIES EXPORT_NAME kernels)
  set_target_properties(lowbit_sage2 PROPERTIES EXPORT_NAME sage2)
  list(APPEND lowbit_header_dirs kernels)
endif()

install(TARGETS ${lowbit_installed_targets} EXPORT lowbit-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development)
foreach(dir ${lowbit_header_dirs})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/lowbit COMPONENT development
          FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h" PATTERN "*.cuh" PATTERN "data" EXCLUDE)
endforeach()
install(EXPORT lowbit-targets NAMESPACE lowbit:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/lowbit COMPONENT development)

set(LOWBIT_INSTALLED_KERNELS ${LOWBIT_HAVE_KERNELS})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/lowbit-config.cmake.in
                              ${PROJECT_BINARY_DIR}/lowbit-config.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/lowbit)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/lowbit-config-version.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/lowbit-config.cmake ${PROJECT_BINARY_DIR}/lowbit-config-version.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/lowbit COMPONENT development)
