# The block detector as a program sees it at start: in effect by default,
# as the unprivileged uid 65534 (CI runs as root), and the fallback to
# sampling, forced, with its one message.
add_executable(cmwq_detect_target ${CMAKE_CURRENT_SOURCE_DIR}/targets/detect_target.c)
target_link_libraries(cmwq_detect_target PRIVATE cmwq_static)
set_target_properties(cmwq_detect_target PROPERTIES OUTPUT_NAME detect_target LINKER_LANGUAGE CXX)
find_program(CMWQ_SETPRIV setpriv)
foreach(mode default unprivileged forced_fallback)
  add_test(NAME block_detect_at_start_${mode}
           COMMAND ${CMAKE_COMMAND} -DMODE=${mode} -DSETPRIV=${CMWQ_SETPRIV} -DRUNNER=${CMWQ_TEST_RUNNER}
                   -DPROG=$<TARGET_FILE:cmwq_detect_target>
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/detect_run.cmake)
  set_tests_properties(block_detect_at_start_${mode} PROPERTIES TIMEOUT 60)
endforeach()
