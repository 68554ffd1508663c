# A program that returns from main with idle workers, queued items and an
# armed timer exits cleanly and promptly.
add_executable(cmwq_exit_clean ${CMAKE_CURRENT_SOURCE_DIR}/exit_clean.c)
target_link_libraries(cmwq_exit_clean PRIVATE cmwq_static)
set_target_properties(cmwq_exit_clean PROPERTIES OUTPUT_NAME exit_clean LINKER_LANGUAGE CXX)
add_test(NAME exit_clean_with_work_queued COMMAND cmwq_exit_clean)
set_tests_properties(exit_clean_with_work_queued PROPERTIES TIMEOUT 30
  PASS_REGULAR_EXPRESSION "returning from main with work queued")
