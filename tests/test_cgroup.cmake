# A real cgroup with a CPU quota (tests/cgroup_quota_test.sh): root only,
# skipped with the reason elsewhere; native builds (it moves a process into
# a cgroup of this machine).
add_executable(cmwq_quota_target ${CMAKE_CURRENT_SOURCE_DIR}/targets/quota_target.c)
target_link_libraries(cmwq_quota_target PRIVATE cmwq_static)
set_target_properties(cmwq_quota_target PROPERTIES OUTPUT_NAME quota_target LINKER_LANGUAGE CXX)
if(NOT CMAKE_CROSSCOMPILING)
  add_test(NAME cgroup_quota_bounds_managed_concurrency_in_a_real_cgroup
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cgroup_quota_test.sh $<TARGET_FILE:cmwq_quota_target>)
  set_tests_properties(cgroup_quota_bounds_managed_concurrency_in_a_real_cgroup PROPERTIES
                       TIMEOUT 90 SKIP_RETURN_CODE 77)
endif()
