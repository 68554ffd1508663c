# API and ABI stability between releases.
#
# old_includes.c calls what moved to another header through its old one,
# built with implicit declarations as errors: a moved declaration must stay
# reachable from where it was for a release.
add_executable(cmwq_old_includes ${CMAKE_CURRENT_LIST_DIR}/old_includes.c)
set_target_properties(cmwq_old_includes PROPERTIES OUTPUT_NAME old_includes C_STANDARD 11
  C_STANDARD_REQUIRED ON LINKER_LANGUAGE CXX)
target_compile_options(cmwq_old_includes PRIVATE -Werror=implicit-function-declaration)
target_link_libraries(cmwq_old_includes PRIVATE cmwq_static)
cmwq_target_defaults(cmwq_old_includes)
add_test(NAME declarations_moved_to_another_header_stay_reachable_from_the_old_one
  COMMAND ${CMWQ_TEST_RUNNER} $<TARGET_FILE:cmwq_old_includes>)
set_tests_properties(declarations_moved_to_another_header_stay_reachable_from_the_old_one
  PROPERTIES TIMEOUT 30 PASS_REGULAR_EXPRESSION "control path \\(not running\\)")

# The shared library against the recorded baseline (scripts/abi.sh, with
# libabigail's abidiff from abigail-tools): a native build with debug
# information and no sanitizer, which is what the baseline was written from.
find_program(CMWQ_ABIDIFF abidiff)
if(NOT CMWQ_ABIDIFF)
  message(STATUS "cmwq: the ABI check is skipped (abidiff not found: abigail-tools)")
elseif(CMAKE_CROSSCOMPILING OR CMWQ_SANITIZE OR NOT CMAKE_BUILD_TYPE MATCHES "^(RelWithDebInfo|Debug)$")
  message(STATUS "cmwq: the ABI check runs in a native RelWithDebInfo or Debug build without sanitizers")
else()
  add_test(NAME public_abi_keeps_every_symbol_of_the_baseline
    COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/abi.sh check $<TARGET_FILE:cmwq_shared>)
  set_tests_properties(public_abi_keeps_every_symbol_of_the_baseline PROPERTIES TIMEOUT 120)
endif()
