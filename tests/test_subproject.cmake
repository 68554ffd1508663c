# cmwq as a subproject: a parent with its own check_headers, c_api and
# detect_target targets configures and builds against it, gets only the
# library targets (no cmwq tests in its ctest, no cmwq files installed) and
# no CMAKE_BUILD_TYPE written into its cache.
if(CMAKE_SCRIPT_MODE_FILE)
  file(REMOVE_RECURSE "${WORK}")
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${SRC}/tests/subproject -B ${WORK}
                          -DCMWQ_SOURCE=${SRC} -DCMAKE_C_COMPILER=${CC} -DCMAKE_CXX_COMPILER=${CXX}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the parent did not configure:\n${out}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK} -j 2 --target parent_prog
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the parent did not build:\n${out}")
  endif()
  execute_process(COMMAND ${WORK}/parent_prog RESULT_VARIABLE rc OUTPUT_VARIABLE out)
  message(STATUS "${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "parent_prog exited with ${rc}")
  endif()
  execute_process(COMMAND ${CTEST} --test-dir ${WORK} -N OUTPUT_VARIABLE out)
  if(NOT out MATCHES "Total Tests: 1\n")
    message(FATAL_ERROR "the parent's ctest has cmwq's tests:\n${out}")
  endif()
  file(STRINGS ${WORK}/CMakeCache.txt bt REGEX "^CMAKE_BUILD_TYPE:")
  if(NOT bt MATCHES "^CMAKE_BUILD_TYPE:[A-Z]*=$")
    message(FATAL_ERROR "cmwq wrote the parent's build type: ${bt}")
  endif()
  foreach(t cmwq_test_core_whitebox wq_dump wq_bench)
    execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK} --target help OUTPUT_VARIABLE help)
    if(help MATCHES "\\.\\.\\. ${t}\n")
      message(FATAL_ERROR "a subproject build has the target ${t}")
    endif()
  endforeach()
  execute_process(COMMAND ${CMAKE_COMMAND} --install ${WORK} --prefix ${WORK}/prefix
                  OUTPUT_VARIABLE out ERROR_VARIABLE out)
  file(GLOB_RECURSE installed ${WORK}/prefix/*)
  if(installed)
    message(FATAL_ERROR "a subproject installed files: ${installed}")
  endif()
  return()
endif()

if(NOT CMWQ_SANITIZE AND NOT CMAKE_CROSSCOMPILING)
  add_test(NAME subproject_builds_only_the_library
           COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR} -DWORK=${CMAKE_BINARY_DIR}/subproject-check
                   -DCC=${CMAKE_C_COMPILER} -DCXX=${CMAKE_CXX_COMPILER} -DCTEST=${CMAKE_CTEST_COMMAND}
                   -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(subproject_builds_only_the_library PROPERTIES TIMEOUT 600)
endif()
