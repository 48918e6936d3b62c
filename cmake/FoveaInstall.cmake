# The installable library: libfovea (a shared library holding the engine and everything below it, built from the
# same static module libraries as the CLI: linking only, no second compile), the public headers include/fovea/*.h,
# and a CMake package so that another project writes
#     find_package(Fovea REQUIRED)
#     target_link_libraries(app PRIVATE Fovea::fovea)
# `cmake --install build --prefix P --component library` installs P/include/fovea, P/lib/libfovea.so and
# P/lib/cmake/Fovea; the component `cli` adds P/bin/fovea. scripts/test_install.sh builds examples/cpp against it.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS fovea RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
# `fovea make-demo-model --llm smollm2` runs this converter; an installed fovea finds it in share/fovea/tools.
install(FILES ${CMAKE_SOURCE_DIR}/tools/smollm2/smollm2_to_internvl.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/fovea/tools/smollm2 COMPONENT cli)

# No shared library from the static GPU-machine build (Debian's static image libraries are not position-independent)
# nor from the sanitizer/fuzzer trees (their runtimes link into executables only).
if(FOVEA_STATIC OR FOVEA_SANITIZE OR FOVEA_FUZZ)
  return()
endif()

add_library(fovea_library SHARED ${CMAKE_SOURCE_DIR}/cmake/fovea_library.cc)
# Every object of fovea_engine (make_engine_service lives there); the linker takes what they need from the rest.
target_link_libraries(fovea_library PRIVATE $<LINK_LIBRARY:WHOLE_ARCHIVE,fovea_engine>)
target_link_options(fovea_library PRIVATE -Wl,--no-undefined)
target_include_directories(fovea_library INTERFACE $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
                                                   $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(fovea_library INTERFACE cxx_std_20)
set_target_properties(fovea_library PROPERTIES OUTPUT_NAME fovea EXPORT_NAME fovea
                                               LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)

install(TARGETS fovea_library EXPORT FoveaTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT library)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/fovea DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT library
        FILES_MATCHING PATTERN "*.h")
set(FOVEA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Fovea)
install(EXPORT FoveaTargets NAMESPACE Fovea:: DESTINATION ${FOVEA_CMAKE_DIR} COMPONENT library)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/FoveaConfig.cmake.in ${CMAKE_BINARY_DIR}/FoveaConfig.cmake
                              INSTALL_DESTINATION ${FOVEA_CMAKE_DIR})
install(FILES ${CMAKE_BINARY_DIR}/FoveaConfig.cmake DESTINATION ${FOVEA_CMAKE_DIR} COMPONENT library)
