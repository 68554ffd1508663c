# End-to-end tests of wqctl and wq_monitor: ctl_target is a small cmwq
# process with its control endpoint started; ctl_tools_test.sh drives the
# tools against it in a private XDG_RUNTIME_DIR.
if(TARGET wqctl AND TARGET wq_monitor)
  add_executable(cmwq_ctl_target ${CMAKE_CURRENT_LIST_DIR}/targets/ctl_target.cpp)
  target_link_libraries(cmwq_ctl_target PRIVATE cmwq_static)
  cmwq_target_defaults(cmwq_ctl_target)
  set_target_properties(cmwq_ctl_target PROPERTIES OUTPUT_NAME ctl_target)
  foreach(mode wqctl wq_monitor)
    add_test(NAME tools_${mode}
             COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/ctl_tools_test.sh ${mode}
                     $<TARGET_FILE:cmwq_ctl_target> $<TARGET_FILE:wqctl>
                     $<TARGET_FILE:wq_monitor>)
    set_tests_properties(tools_${mode} PROPERTIES TIMEOUT 180)
  endforeach()
  if(TARGET wq_exporter)
    add_test(NAME tools_wq_exporter_serves_both_formats
             COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/exporter_test.sh
                     $<TARGET_FILE:cmwq_ctl_target> $<TARGET_FILE:wq_exporter>)
    set_tests_properties(tools_wq_exporter_serves_both_formats PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)
  endif()
endif()
