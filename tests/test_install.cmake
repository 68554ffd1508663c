# Installed-package checks, the C API test and check_headers.
#
# A consumer sees only what `cmake --install` puts under a prefix, so these
# tests install into <build>/stage (the prefix scripts/test.sh uses) and build
# against that: kernel_style.c and c_api.c with the pkg-config command line
# README.md gives, examples/ with find_package(cmwq). The file has two modes:
# included by tests/CMakeLists.txt it registers the tests; run with
# `cmake -DSTEP=... -P` it performs one step, so every step is a CMake script
# rather than shell quoting inside add_test.

if(CMAKE_SCRIPT_MODE_FILE)
  # ---- script mode: one step ----------------------------------------------
  function(run_or_die what)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${what} failed (${rc})")
    endif()
  endfunction()

  get_filename_component(stage "${STAGE}" REALPATH)

  if(STEP STREQUAL "pkg_config")
    # Build SRC exactly as README.md says, with the staged cmwq.pc, and run it.
    set(ENV{PKG_CONFIG_PATH} "${stage}/${LIBDIR}/pkgconfig")
    execute_process(COMMAND pkg-config --variable=libdir cmwq
                    OUTPUT_VARIABLE libdir OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "pkg-config cannot find cmwq in $ENV{PKG_CONFIG_PATH}")
    endif()
    get_filename_component(libdir "${libdir}" REALPATH)
    if(NOT libdir STREQUAL "${stage}/${LIBDIR}")
      message(FATAL_ERROR "the staged cmwq.pc gives libdir=${libdir}, not "
        "${stage}/${LIBDIR}: cmwq.pc is not relocatable (its prefix should "
        "derive from \${pcfiledir})")
    endif()
    # C sources as C11 with the C compiler, C++ sources as C++20 with the
    # C++ compiler: README.md's two command lines.
    set(std "-std=c11")
    if(SRC MATCHES "\\.cpp$")
      set(std "-std=c++20")
      set(CC "${CXX}")
    endif()
    set(cmd "\"$0\" ${std} -Wall -Wextra -Werror \"$1\" $(pkg-config --cflags --libs cmwq) -o \"$2\"")
    message(STATUS "PKG_CONFIG_PATH=$ENV{PKG_CONFIG_PATH}")
    message(STATUS "${CC} ${std} -Wall -Wextra -Werror ${SRC} $(pkg-config --cflags --libs cmwq) -o ${OUT}")
    run_or_die("compiling ${SRC}" sh -c "${cmd}" "${CC}" "${SRC}" "${OUT}")
    # Runs a built consumer; it must exit 0 and print EXPECT.
    function(run_consumer exe)
      execute_process(COMMAND "${exe}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
      message(STATUS "${exe}:\n${out}")
      if(NOT rc EQUAL 0)
        message(FATAL_ERROR "${exe} exited with ${rc}")
      endif()
      if(EXPECT AND NOT out MATCHES "${EXPECT}")
        message(FATAL_ERROR "${exe} did not print \"${EXPECT}\"")
      endif()
    endfunction()
    # cmwq.pc has no rpath: a private prefix is found through LD_LIBRARY_PATH.
    set(ENV{LD_LIBRARY_PATH} "${stage}/${LIBDIR}")
    run_consumer("${OUT}")
    execute_process(COMMAND readelf -d "${OUT}" OUTPUT_VARIABLE dyn)
    if(dyn MATCHES "R(UN)?PATH")
      message(FATAL_ERROR "${OUT} has an rpath from cmwq.pc:\n${dyn}")
    endif()
    # A fully static link of the same C program from the .pc alone.
    set(cmd "\"$0\" -static ${std} -Wall -Wextra -Werror \"$1\" $(pkg-config --static --cflags --libs cmwq) -o \"$2\"")
    message(STATUS "${CC} -static ${std} ... ${SRC} $(pkg-config --static --cflags --libs cmwq) -o ${OUT}_static")
    run_or_die("linking ${SRC} statically" sh -c "${cmd}" "${CC}" "${SRC}" "${OUT}_static")
    run_consumer("${OUT}_static")
    # The staged library is the one loaded.
    find_program(ldd ldd)
    if(ldd)
      execute_process(COMMAND ${ldd} "${OUT}" OUTPUT_VARIABLE deps)
      string(REGEX MATCH "libcmwq\\.so[.0-9]* => ([^ \n]+)" loaded "${deps}")
      get_filename_component(loaded "${CMAKE_MATCH_1}" DIRECTORY)
      get_filename_component(loaded "${loaded}" REALPATH)
      if(NOT loaded STREQUAL "${stage}/${LIBDIR}")
        message(FATAL_ERROR "${OUT} does not load the staged libcmwq:\n${deps}")
      endif()
    endif()

  elseif(STEP STREQUAL "find_package")
    # Configure, build and run examples/ against the stage alone.
    file(REMOVE_RECURSE "${WORK}")
    set(gen -G "${GENERATOR}")
    if(MAKE_PROGRAM)
      list(APPEND gen -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
    endif()
    run_or_die("configuring examples/" ${CMAKE_COMMAND} -S "${SRC_DIR}" -B "${WORK}" ${gen}
      -DCMAKE_PREFIX_PATH=${stage} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
      -DCMAKE_C_COMPILER=${CC} -DCMAKE_CXX_COMPILER=${CXX}
      -DCMAKE_BUILD_TYPE=${CONFIG})
    file(STRINGS "${WORK}/CMakeCache.txt" found REGEX "^cmwq_DIR:")
    string(REGEX REPLACE "^[^=]*=" "" found "${found}")
    get_filename_component(found "${found}" REALPATH)
    string(FIND "${found}" "${stage}/" at)
    if(NOT at EQUAL 0)
      message(FATAL_ERROR "find_package(cmwq) found ${found}, not the stage ${stage}")
    endif()
    run_or_die("building examples/" ${CMAKE_COMMAND} --build "${WORK}" --config "${CONFIG}")
    run_or_die("running examples/" ${CTEST} --test-dir "${WORK}" -C "${CONFIG}"
      --output-on-failure)

  else()
    message(FATAL_ERROR "unknown STEP '${STEP}'")
  endif()
  return()
endif()

# ---- configure mode: register the tests -------------------------------------

set(cmwq_install_script ${CMAKE_CURRENT_LIST_FILE})
set(cmwq_stage ${CMAKE_BINARY_DIR}/stage)

# The C API test, in-tree: built with the project's flags and sanitizers.
add_executable(cmwq_c_api ${CMAKE_CURRENT_LIST_DIR}/c_api.c)
set_target_properties(cmwq_c_api PROPERTIES OUTPUT_NAME c_api C_STANDARD 11 C_STANDARD_REQUIRED ON
  C_EXTENSIONS OFF LINKER_LANGUAGE CXX)
target_link_libraries(cmwq_c_api PRIVATE cmwq_static)
cmwq_target_defaults(cmwq_c_api)
add_test(NAME c_api_returns_kernel_values COMMAND cmwq_c_api)
set_tests_properties(c_api_returns_kernel_values PROPERTIES TIMEOUT 60)
# The timer API and the rest of the kernel names, the same way.
add_executable(cmwq_kernel_timers ${CMAKE_CURRENT_LIST_DIR}/kernel_timers.c)
set_target_properties(cmwq_kernel_timers PROPERTIES OUTPUT_NAME kernel_timers C_STANDARD 11
  C_STANDARD_REQUIRED ON C_EXTENSIONS OFF LINKER_LANGUAGE CXX)
target_link_libraries(cmwq_kernel_timers PRIVATE cmwq_static)
cmwq_target_defaults(cmwq_kernel_timers)
add_test(NAME kernel_timers_and_remaining_names_behave COMMAND cmwq_kernel_timers)
set_tests_properties(kernel_timers_and_remaining_names_behave PROPERTIES TIMEOUT 60
  PASS_REGULAR_EXPRESSION "[1-9][0-9]* passed, 0 failed")

# Install into the stage once, before any consumer test.
add_test(NAME install_into_stage
  COMMAND ${CMAKE_COMMAND} --install ${CMAKE_BINARY_DIR} --prefix ${cmwq_stage}
          --config $<CONFIG>)
set_tests_properties(install_into_stage PROPERTIES
  FIXTURES_SETUP cmwq_stage RESOURCE_LOCK cmwq_stage TIMEOUT 120)

# The USDT probes survive installation. Skipped without readelf, or when
# <sys/sdt.h> was missing at configure time (no probes were compiled in).
if(CMWQ_HAVE_SDT)
  if(CMAKE_READELF)
    set(cmwq_readelf ${CMAKE_READELF})
  else()
    set(cmwq_readelf readelf)
  endif()
  add_test(NAME installed_library_has_stapsdt_notes
    COMMAND sh -c [[
      command -v "$1" >/dev/null 2>&1 || { echo "SKIP: no readelf"; exit 77; }
      cd "$2" || exit 1
      n=$("$1" -n "$3"/libcmwq.so | grep -c stapsdt)
      echo "$n stapsdt notes in $2/$3/libcmwq.so"
      test "$n" -gt 0]]
      sh ${cmwq_readelf} ${cmwq_stage} ${CMAKE_INSTALL_LIBDIR})
else()
  add_test(NAME installed_library_has_stapsdt_notes
    COMMAND sh -c "echo 'SKIP: <sys/sdt.h> not found at configure time (systemtap-sdt-dev)'; exit 77")
endif()
set_tests_properties(installed_library_has_stapsdt_notes PROPERTIES
  FIXTURES_REQUIRED cmwq_stage SKIP_RETURN_CODE 77 TIMEOUT 60)

# Installed programs find the installed library wherever the prefix is.
if(CMWQ_BUILD_TOOLS)
  add_test(NAME installed_wq_dump_runs_from_stage
    COMMAND ${cmwq_stage}/${CMAKE_INSTALL_BINDIR}/wq_dump --topology-only)
  set_tests_properties(installed_wq_dump_runs_from_stage PROPERTIES
    FIXTURES_REQUIRED cmwq_stage TIMEOUT 60)
endif()

# Consumers of the stage. Not in sanitizer builds: the README's command line
# has no -fsanitize, and an instrumented library needs its runtime loaded
# first. The in-tree c_api test covers the same calls there.
if(NOT CMWQ_SANITIZE)
  function(cmwq_pkg_config_test name src expect)
    get_filename_component(exe ${src} NAME_WE)
    add_test(NAME ${name}
      COMMAND ${CMAKE_COMMAND} -DSTEP=pkg_config -DSTAGE=${cmwq_stage}
              -DLIBDIR=${CMAKE_INSTALL_LIBDIR} -DCC=${CMAKE_C_COMPILER} -DCXX=${CMAKE_CXX_COMPILER}
              -DSRC=${src} -DOUT=${CMAKE_BINARY_DIR}/install-check/${exe}
              -DEXPECT=${expect} -P ${cmwq_install_script})
    set_tests_properties(${name} PROPERTIES
      FIXTURES_REQUIRED cmwq_stage TIMEOUT 300)
  endfunction()
  cmwq_pkg_config_test(installed_pkg_config_builds_kernel_style_with_werror_and_runs
    ${PROJECT_SOURCE_DIR}/examples/kernel_style.c "")
  cmwq_pkg_config_test(installed_pkg_config_builds_c_api_with_werror_and_passes
    ${CMAKE_CURRENT_LIST_DIR}/c_api.c "[1-9][0-9]* passed, 0 failed")
  cmwq_pkg_config_test(installed_pkg_config_builds_kernel_timers_with_werror_and_passes
    ${CMAKE_CURRENT_LIST_DIR}/kernel_timers.c "[1-9][0-9]* passed, 0 failed")
  cmwq_pkg_config_test(installed_pkg_config_builds_cxx_fanout_and_runs
    ${PROJECT_SOURCE_DIR}/examples/cxx_fanout.cpp "total [0-9]+, 1 failed")
  cmwq_pkg_config_test(installed_pkg_config_builds_cxx_periodic_and_runs
    ${PROJECT_SOURCE_DIR}/examples/cxx_periodic.cpp "0 after the stop")
  cmwq_pkg_config_test(installed_pkg_config_builds_cxx_blocking_io_and_runs
    ${PROJECT_SOURCE_DIR}/examples/cxx_blocking_io.cpp "16 requests in")
  add_test(NAME installed_find_package_builds_and_runs_examples
    COMMAND ${CMAKE_COMMAND} -DSTEP=find_package -DSTAGE=${cmwq_stage}
            -DSRC_DIR=${PROJECT_SOURCE_DIR}/examples
            -DWORK=${CMAKE_BINARY_DIR}/install-check/examples
            -DGENERATOR=${CMAKE_GENERATOR} -DMAKE_PROGRAM=${CMAKE_MAKE_PROGRAM}
            -DCC=${CMAKE_C_COMPILER} -DCXX=${CMAKE_CXX_COMPILER}
            -DCTEST=${CMAKE_CTEST_COMMAND} -DCONFIG=$<CONFIG>
            -P ${cmwq_install_script})
  set_tests_properties(installed_find_package_builds_and_runs_examples PROPERTIES
    FIXTURES_REQUIRED cmwq_stage TIMEOUT 300)
  file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/install-check)
  # A program with its own kernel shims (tests/foreign_shims/README.md):
  # both include orders, C11 and C++20, its own timers and cmwq's, -Werror.
  add_test(NAME installed_foreign_shims_program_builds_in_both_orders_and_runs
    COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/foreign_shims/run.sh ${cmwq_stage} ${CMAKE_INSTALL_LIBDIR}
            ${CMAKE_C_COMPILER} ${CMAKE_CXX_COMPILER} ${CMAKE_BINARY_DIR}/install-check/foreign_shims)
  set_tests_properties(installed_foreign_shims_program_builds_in_both_orders_and_runs PROPERTIES
    FIXTURES_REQUIRED cmwq_stage SKIP_RETURN_CODE 77 TIMEOUT 300)
else()
  message(STATUS "cmwq: installed-package consumer tests off under CMWQ_SANITIZE=${CMWQ_SANITIZE}")
endif()

# check_headers: each public header compiles alone (and twice: include
# guards), C headers as C11 and C++20, .hpp as C++20, warnings as errors.
# One test per header and language; the target runs them all.
file(GLOB_RECURSE cmwq_public_headers CONFIGURE_DEPENDS
  RELATIVE ${PROJECT_SOURCE_DIR}/include
  ${PROJECT_SOURCE_DIR}/include/*.h ${PROJECT_SOURCE_DIR}/include/*.hpp)
list(APPEND cmwq_public_headers cmwq/version.h) # generated
if(NOT CMWQ_HAVE_BOOST_ASIO) # tests/CMakeLists.txt looked for it
  list(REMOVE_ITEM cmwq_public_headers cmwq/asio.hpp cmwq/asio_detail.hpp cmwq/asio_reactor.hpp)
endif()
# <cmwq/urcu.h> needs a liburcu flavour included before it (test_rcu_work
# compiles it that way).
list(REMOVE_ITEM cmwq_public_headers cmwq/urcu.h)
set(cmwq_header_flags -Wall -Wextra -Wpedantic -Werror -fsyntax-only
  -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_BINARY_DIR}/include)
set(cmwq_header_commands)
foreach(h ${cmwq_public_headers})
  string(MAKE_C_IDENTIFIER ${h} id)
  set(langs cxx20)
  if(h MATCHES "\\.h$")
    list(PREPEND langs c11)
  endif()
  foreach(lang ${langs})
    if(lang STREQUAL "c11")
      set(tu ${CMAKE_BINARY_DIR}/check_headers/${id}.c)
      set(cmd ${CMAKE_C_COMPILER} -std=c11 ${cmwq_header_flags} ${tu})
    else()
      set(tu ${CMAKE_BINARY_DIR}/check_headers/${id}.cpp)
      set(cmd ${CMAKE_CXX_COMPILER} -std=c++20 ${cmwq_header_flags} ${tu})
    endif()
    # The typedef keeps a TU of a macro-only header (export.h) non-empty.
    file(CONFIGURE OUTPUT ${tu} CONTENT "#include <${h}>\n#include <${h}>\ntypedef int cmwq_check_headers_tu;\n")
    add_test(NAME check_headers.${h}.${lang} COMMAND ${cmd})
    set_tests_properties(check_headers.${h}.${lang} PROPERTIES TIMEOUT 60)
    list(APPEND cmwq_header_commands COMMAND ${cmd})
  endforeach()
endforeach()
# No public header defines a kernel primitive the program brings itself:
# lists what each header provides, fails on a name defined anyway.
# Host-only: a cross toolchain's sysroot lacks the shims' own libraries
# (liburcu's list.h), and what is checked does not depend on the target.
find_program(CMWQ_PYTHON3 python3)
if(CMWQ_PYTHON3 AND NOT CMAKE_CROSSCOMPILING)
  add_test(NAME public_headers_define_kernel_names_only_where_the_program_has_none
    COMMAND ${CMWQ_PYTHON3} ${PROJECT_SOURCE_DIR}/scripts/check_kernel_names.py
            ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/include
            --cc ${CMAKE_C_COMPILER} --cxx ${CMAKE_CXX_COMPILER})
  set_tests_properties(public_headers_define_kernel_names_only_where_the_program_has_none PROPERTIES
    TIMEOUT 120 PASS_REGULAR_EXPRESSION "[1-9][0-9]* passed, 0 failed")
endif()
# The engine's floors (src/engine/engine.h's list): no call goes up a floor unless
# the list names it (scripts/check_floors.py, with universal-ctags).
if(CMWQ_PYTHON3)
  add_test(NAME engine_calls_go_up_a_floor_only_where_engine_h_names_them
    COMMAND ${CMWQ_PYTHON3} ${PROJECT_SOURCE_DIR}/scripts/check_floors.py ${PROJECT_SOURCE_DIR}/src)
  set_tests_properties(engine_calls_go_up_a_floor_only_where_engine_h_names_them PROPERTIES
    TIMEOUT 60 PASS_REGULAR_EXPRESSION "upward calls, each named in engine.h")
endif()
add_custom_target(cmwq_check_headers ${cmwq_header_commands}
  COMMENT "Compiling each public header alone" VERBATIM)

# The shared library exports the public API only (hidden visibility,
# <cmwq/export.h>): no engine or control-protocol internals in its ABI.
if(NOT CMWQ_SANITIZE AND NOT CMAKE_CROSSCOMPILING)
  add_test(NAME shared_library_exports_only_the_public_api
    COMMAND sh -c [[
      command -v nm >/dev/null && command -v c++filt >/dev/null || { echo "SKIP: no nm/c++filt"; exit 77; }
      syms=$(nm -D --defined-only "$1" | c++filt) || exit 1
      echo "$(echo "$syms" | wc -l) exported symbols"
      bad=$(echo "$syms" | grep -E 'cmwq::(detail|control)::|cmwq::detail' || true)
      if [ -n "$bad" ]; then echo "internals exported:"; echo "$bad"; exit 1; fi
      echo "$syms" | grep -q ' T alloc_workqueue$' || { echo "alloc_workqueue is not exported"; exit 1; }
      echo "$syms" | grep -q ' T cmwq_set_log_handler$' || { echo "cmwq_set_log_handler is not exported"; exit 1; }]]
      sh $<TARGET_FILE:cmwq_shared>)
  set_tests_properties(shared_library_exports_only_the_public_api PROPERTIES
    SKIP_RETURN_CODE 77 TIMEOUT 60)
endif()
