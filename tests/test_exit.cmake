# A program that returns from main with idle workers, queued items and an
# armed timer exits cleanly and promptly.
add_executable(cmwq_exit_clean ${CMAKE_CURRENT_SOURCE_DIR}/exit_clean.c)
target_link_libraries(cmwq_exit_clean PRIVATE cmwq_static)
set_target_properties(cmwq_exit_clean PROPERTIES OUTPUT_NAME exit_clean LINKER_LANGUAGE CXX)
add_test(NAME exit_clean_with_work_queued COMMAND cmwq_exit_clean)
set_tests_properties(exit_clean_with_work_queued PROPERTIES TIMEOUT 30
  PASS_REGULAR_EXPRESSION "returning from main with work queued")

# The 2023 report's shape: max_active 8 fed from every CPU at once, within the
# kernel's node shares (also
# run inside the many-CPU guest, scripts/guest-run.sh).
add_executable(cmwq_maxactive_target ${CMAKE_CURRENT_SOURCE_DIR}/targets/maxactive_target.cpp)
target_link_libraries(cmwq_maxactive_target PRIVATE cmwq_static)
set_target_properties(cmwq_maxactive_target PROPERTIES OUTPUT_NAME maxactive_target)
add_test(NAME unbound_max_active_8_from_every_cpu_stays_within_the_node_shares
         COMMAND ${CMWQ_TEST_RUNNER} $<TARGET_FILE:cmwq_maxactive_target>)
set_tests_properties(unbound_max_active_8_from_every_cpu_stays_within_the_node_shares PROPERTIES TIMEOUT 60)

# Real CPU hotplug under load: it takes CPUs offline, so it runs only inside
# the many-CPU guest (scripts/guest-run.sh sets CMWQ_HOTPLUG_REAL=1), never
# on the build machine; the engine's side is tested there by
# test_hotplug_whitebox with a given online mask.
add_executable(cmwq_hotplug_target ${CMAKE_CURRENT_SOURCE_DIR}/targets/hotplug_target.cpp)
target_link_libraries(cmwq_hotplug_target PRIVATE cmwq_static)
set_target_properties(cmwq_hotplug_target PROPERTIES OUTPUT_NAME hotplug_target)
