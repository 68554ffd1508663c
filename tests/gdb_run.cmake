# Runs PROG under GDB with the helper SCRIPT; see test_gdb.cmake.
execute_process(COMMAND ${GDB} -nx -batch -ex run --args /bin/true
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out TIMEOUT 60)
if(NOT rc EQUAL 0 OR out MATCHES "ptrace|Operation not permitted")
  message("gdb cannot run programs here (${rc}): ${out}")
  cmake_language(EXIT 77)
endif()
execute_process(COMMAND ${GDB} -nx -batch
                  -ex "set pagination off" -ex "set debuginfod enabled off"
                  -ex "source ${SCRIPT}"
                  -ex "break cmwq_gdb_stop_here" -ex run
                  -ex "cmwq-current"
                  -ex "thread 1" -ex "cmwq-current"
                  -ex "kill"
                  --args ${PROG}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 90)
message("${out}\n${err}")
foreach(want "workqueue gdb_target_wq" "item replay_journal" "desc \"segment 12\"" "pool [0-9]+ \\(unbound"
             "not a cmwq worker thread")
  if(NOT out MATCHES "${want}")
    message(FATAL_ERROR "cmwq-current output lacks '${want}'")
  endif()
endforeach()
