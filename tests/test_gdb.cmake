# tools/gdb/cmwq.py: stopped inside a named work item, cmwq-current names the
# workqueue, the item, its description and the pool; on the main thread it
# says it is not a worker. Skipped where gdb is missing or cannot trace, and
# not registered where the library carries no debug information (Release,
# MinSizeRel): the helper reads the engine's structures by their types.
add_executable(cmwq_gdb_target ${CMAKE_CURRENT_SOURCE_DIR}/targets/gdb_target.cpp)
target_link_libraries(cmwq_gdb_target PRIVATE cmwq_static)
set_target_properties(cmwq_gdb_target PROPERTIES OUTPUT_NAME gdb_target)
cmwq_target_defaults(cmwq_gdb_target)
target_compile_options(cmwq_gdb_target PRIVATE -g)
find_program(CMWQ_GDB gdb)
string(TOUPPER "${CMAKE_BUILD_TYPE}" _cmwq_bt)
string(FIND "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${_cmwq_bt}}" "-g" _cmwq_has_g)
if(CMWQ_GDB AND NOT CMAKE_CROSSCOMPILING AND (_cmwq_has_g GREATER -1 OR _cmwq_bt STREQUAL "" OR _cmwq_bt STREQUAL "DEBUG"))
  add_test(NAME gdb_helper_names_workqueue_item_and_pool
           COMMAND ${CMAKE_COMMAND} -DGDB=${CMWQ_GDB} -DPROG=$<TARGET_FILE:cmwq_gdb_target>
                   -DSCRIPT=${PROJECT_SOURCE_DIR}/tools/gdb/cmwq.py
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/gdb_run.cmake)
  set_tests_properties(gdb_helper_names_workqueue_item_and_pool PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)
endif()
