# Man pages (scdoc) and Debian packages (CPack): included by the top-level
# CMakeLists.txt when cmwq installs.
#
#   cmake -S . -B build-deb -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_BUILD_TYPE=Release
#   cmake --build build-deb && (cd build-deb && cpack -G DEB)
#
# gives libcmwq0 (the shared library), libcmwq-dev (headers, static library,
# cmwq.pc, the CMake package, cmwq(7)) and cmwq-tools (wqctl, wq_monitor,
# wq_dump, wq_bench, wq_detect_bench, the gdb helper, their man pages).
# scripts/debs.sh builds, installs and removes them.

# Who the packages name as maintainer: set it when building packages to
# publish (the default is a placeholder lintian rightly calls bogus).
set(CMWQ_PACKAGE_CONTACT "cmwq developers <cmwq-devel@invalid>" CACHE STRING
    "Maintainer field of the Debian packages")

# ---- man pages -------------------------------------------------------------
# Installed gzipped (-9n: reproducible), as Debian policy wants.
find_program(CMWQ_SCDOC scdoc)
find_program(CMWQ_GZIP gzip)
set(cmwq_man_pages wq_dump.1 wq_monitor.1 wqctl.1 wq_bench.1 wq_exporter.1 cmwq.7)
if(CMWQ_SCDOC AND CMWQ_GZIP)
  set(cmwq_man_out)
  foreach(page ${cmwq_man_pages})
    set(src ${PROJECT_SOURCE_DIR}/docs/man/${page}.scd)
    set(out ${PROJECT_BINARY_DIR}/man/${page}.gz)
    add_custom_command(OUTPUT ${out}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
      COMMAND sh -c "\"$0\" < \"$1\" | \"$2\" -9n > \"$3\"" ${CMWQ_SCDOC} ${src} ${CMWQ_GZIP} ${out}
      DEPENDS ${src} VERBATIM)
    list(APPEND cmwq_man_out ${out})
    string(REGEX MATCH "[0-9]$" section ${page})
    if(page STREQUAL "wq_exporter.1" AND NOT TARGET wq_exporter)
      continue()
    endif()
    if(section STREQUAL "7")
      set(component dev)
    else()
      set(component tools)
    endif()
    install(FILES ${out} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section} COMPONENT ${component})
  endforeach()
  add_custom_target(cmwq_man ALL DEPENDS ${cmwq_man_out})
else()
  message(STATUS "cmwq: man pages not built (scdoc or gzip not found: apt-get install scdoc)")
endif()

# ---- copyright and changelog of each package -------------------------------
if(CMWQ_GZIP)
  set(cmwq_changelog ${PROJECT_BINARY_DIR}/packaging/changelog.gz)
  string(TIMESTAMP cmwq_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
  file(WRITE ${PROJECT_BINARY_DIR}/packaging/changelog
    "cmwq (${PROJECT_VERSION}) unstable; urgency=medium\n\n"
    "  * Release ${PROJECT_VERSION}; see the project's history for changes.\n\n"
    " -- ${CMWQ_PACKAGE_CONTACT}  ${cmwq_date}\n")
  add_custom_command(OUTPUT ${cmwq_changelog}
    COMMAND ${CMWQ_GZIP} -9n -c ${PROJECT_BINARY_DIR}/packaging/changelog > ${cmwq_changelog}
    DEPENDS ${PROJECT_BINARY_DIR}/packaging/changelog VERBATIM)
  add_custom_target(cmwq_changelog ALL DEPENDS ${cmwq_changelog})
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/copyright.in ${PROJECT_BINARY_DIR}/packaging/copyright @ONLY)
foreach(pair "runtime;libcmwq${PROJECT_VERSION_MAJOR}" "dev;libcmwq-dev" "tools;cmwq-tools")
  list(GET pair 0 component)
  list(GET pair 1 package)
  install(FILES ${PROJECT_BINARY_DIR}/packaging/copyright
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package} COMPONENT ${component})
  if(CMWQ_GZIP)
    install(FILES ${cmwq_changelog} DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package}
            RENAME changelog.gz COMPONENT ${component})
  endif()
endforeach()

# ---- Debian packages --------------------------------------------------------
if(NOT PROJECT_IS_TOP_LEVEL)
  return()
endif()
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME cmwq)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${CMWQ_PACKAGE_CONTACT}")
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Concurrency Managed Workqueue for applications")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev tools)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_LICENSE "Apache-2.0")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libcmwq${PROJECT_VERSION_MAJOR})
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libcmwq-dev)
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME cmwq-tools)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
  "Concurrency Managed Workqueue - shared library\n The Linux kernel's workqueue (cmwq) in user space: per-CPU pools that stay\n busy when work blocks, topology-aware unbound pools, ordered and delayed\n work, flush and cancel with exact results, rescuers.")
set(CPACK_COMPONENT_DEV_DESCRIPTION
  "Concurrency Managed Workqueue - development files\n Headers (the kernel-compatible C API and the C++ API), the static library,\n pkg-config and CMake package files, cmwq(7).")
set(CPACK_COMPONENT_TOOLS_DESCRIPTION
  "Concurrency Managed Workqueue - tools\n wqctl, wq_monitor and wq_dump to inspect and tune running programs,\n wq_bench, and a gdb helper.")
# The runtime package's dependencies come from dpkg-shlibdeps; it declares
# its own shlibs and triggers ldconfig. The others need exactly this build of
# the library (and dpkg-shlibdeps for the rest, with the build's library
# found in the build tree).
find_program(CMWQ_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(CMWQ_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/src)
endif()
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# The ldconfig trigger Debian policy asks of a shared library package.
file(WRITE ${PROJECT_BINARY_DIR}/packaging/triggers "activate-noawait ldconfig\n")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${PROJECT_BINARY_DIR}/packaging/triggers)
set(cmwq_exact "libcmwq${PROJECT_VERSION_MAJOR} (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${cmwq_exact}")
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "${cmwq_exact}")
include(CPack)
