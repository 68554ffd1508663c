# A program started under RLIMIT_NPROC 1 to 4 either runs, degraded and with
# messages, or is refused with clear errors: it never crashes. Root ignores
# the limit, so as root the program runs as the unprivileged uid 65534.
add_executable(cmwq_nproc_target ${CMAKE_CURRENT_SOURCE_DIR}/targets/nproc_target.c)
target_link_libraries(cmwq_nproc_target PRIVATE cmwq_static)
set_target_properties(cmwq_nproc_target PROPERTIES OUTPUT_NAME nproc_target LINKER_LANGUAGE CXX)
find_program(CMWQ_PRLIMIT prlimit)
find_program(CMWQ_SETPRIV setpriv)
if(CMWQ_PRLIMIT)
  foreach(n 1 2 3 4)
    add_test(NAME nproc_${n}_never_crashes
             COMMAND ${CMAKE_COMMAND} -DPRLIMIT=${CMWQ_PRLIMIT} -DSETPRIV=${CMWQ_SETPRIV}
                     -DNPROC=${n} -DPROG=$<TARGET_FILE:cmwq_nproc_target>
                     -P ${CMAKE_CURRENT_SOURCE_DIR}/nproc_run.cmake)
    set_tests_properties(nproc_${n}_never_crashes PROPERTIES TIMEOUT 60)
  endforeach()
endif()
