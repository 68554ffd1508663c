# tests/test_bench.cmake - smoke tests of wq_bench: every protocol, --json,
# --vs, --shard-sizes, --ab-wake, --percpu and --sysfs-root, with tiny sizes.
#
# They check the shape of the output and the exit status (wq_bench counts
# every item and exits 1 when one did not run); never speed: numbers live in
# docs/benchmarks.md. This file is both the test list (included by
# tests/CMakeLists.txt) and the checker each test runs (cmake -P), so the
# JSON is parsed with string(JSON) and no extra tool is needed.

if(CMAKE_SCRIPT_MODE_FILE)
  cmake_minimum_required(VERSION 3.25)
  # ---- checker: cmake -DBENCH=... -DARGS=... [-DEXPECT_RC=n] [-DSTDOUT=re@@re]
  #      [-DSTDERR=re] [-DJSON=array=min:key,key@@...] [-DSNAPSHOT=small|big:DIR] -P this
  if(NOT DEFINED EXPECT_RC)
    set(EXPECT_RC 0)
  endif()

  # Fake sysfs trees, written at test time so they match the CPUs this
  # process may use: "small" holds the first allowed CPU only, "big" holds
  # four CPUs more than are allowed.
  if(DEFINED SNAPSHOT)
    string(REPLACE ":" ";" _snap "${SNAPSHOT}")
    list(GET _snap 0 _kind)
    list(GET _snap 1 _dir)
    file(READ /proc/self/status _status)
    string(REGEX MATCH "Cpus_allowed_list:[ \t]*([0-9,-]+)" _m "${_status}")
    set(_allowed "${CMAKE_MATCH_1}")
    string(REPLACE "," ";" _ranges "${_allowed}")
    set(_cpus "")
    foreach(_r IN LISTS _ranges)
      if(_r MATCHES "^([0-9]+)-([0-9]+)$")
        foreach(_c RANGE ${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
          list(APPEND _cpus ${_c})
        endforeach()
      else()
        list(APPEND _cpus ${_r})
      endif()
    endforeach()
    list(LENGTH _cpus _ncpus)
    list(GET _cpus 0 _first)
    if(_kind STREQUAL "small")
      set(_snap_cpus ${_first})
      set(_online "${_first}")
    else()
      math(EXPR _last "${_ncpus} + 3")
      set(_snap_cpus "")
      foreach(_c RANGE 0 ${_last})
        list(APPEND _snap_cpus ${_c})
      endforeach()
      set(_online "0-${_last}")
    endif()
    file(REMOVE_RECURSE "${_dir}")
    set(_cpu "${_dir}/devices/system/cpu")
    foreach(_f online possible present)
      file(WRITE "${_cpu}/${_f}" "${_online}\n")
    endforeach()
    file(WRITE "${_dir}/devices/system/node/online" "0\n")
    file(WRITE "${_dir}/devices/system/node/possible" "0\n")
    file(WRITE "${_dir}/devices/system/node/node0/cpulist" "${_online}\n")
    foreach(_c IN LISTS _snap_cpus)
      set(_t "${_cpu}/cpu${_c}/topology")
      foreach(_f thread_siblings_list core_cpus_list)
        file(WRITE "${_t}/${_f}" "${_c}\n")
      endforeach()
      foreach(_f package_cpus_list core_siblings_list)
        file(WRITE "${_t}/${_f}" "${_online}\n")
      endforeach()
      file(WRITE "${_t}/core_id" "${_c}\n")
      file(WRITE "${_t}/physical_package_id" "0\n")
      file(WRITE "${_cpu}/cpu${_c}/cache/index3/level" "3\n")
      file(WRITE "${_cpu}/cpu${_c}/cache/index3/type" "Unified\n")
      file(WRITE "${_cpu}/cpu${_c}/cache/index3/shared_cpu_list" "${_online}\n")
    endforeach()
  endif()

  separate_arguments(_args UNIX_COMMAND "${ARGS}")
  execute_process(COMMAND "${BENCH}" ${_args}
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err
                  TIMEOUT 600)
  set(_ctx "wq_bench ${ARGS}\n--- stdout ---\n${_out}\n--- stderr ---\n${_err}")
  if(NOT "${_rc}" STREQUAL "${EXPECT_RC}")
    message(FATAL_ERROR "exit status ${_rc}, expected ${EXPECT_RC}\n${_ctx}")
  endif()
  foreach(_which STDOUT STDERR)
    if(NOT DEFINED ${_which})
      continue()
    endif()
    if(_which STREQUAL "STDOUT")
      set(_text "${_out}")
    else()
      set(_text "${_err}")
    endif()
    string(REPLACE "@@" ";" _res "${${_which}}")
    foreach(_re IN LISTS _res)
      if(NOT _text MATCHES "${_re}")
        message(FATAL_ERROR "${_which} does not match \"${_re}\"\n${_ctx}")
      endif()
    endforeach()
  endforeach()

  # JSON: each entry "array=min:key,key,..." requires top-level `array` to
  # hold at least `min` objects, each with every key; `failures` must be 0
  # and the kernel protocol's top-level keys must be there.
  if(DEFINED JSON)
    string(JSON _t ERROR_VARIABLE _jerr TYPE "${_out}")
    if(_jerr OR NOT _t STREQUAL "OBJECT")
      message(FATAL_ERROR "stdout is not one JSON object (${_jerr})\n${_ctx}")
    endif()
    foreach(_k threads items_per_thread results failures)
      string(JSON _v ERROR_VARIABLE _jerr GET "${_out}" ${_k})
      if(_jerr)
        message(FATAL_ERROR "JSON lacks \"${_k}\"\n${_ctx}")
      endif()
    endforeach()
    string(JSON _failures GET "${_out}" failures)
    if(NOT _failures EQUAL 0)
      message(FATAL_ERROR "JSON reports ${_failures} failed measurement(s)\n${_ctx}")
    endif()
    string(REPLACE "@@" ";" _specs "${JSON}")
    foreach(_spec IN LISTS _specs)
      if(NOT _spec MATCHES "^([a-z_]+)=([0-9]+):(.*)$")
        message(FATAL_ERROR "bad JSON spec ${_spec}")
      endif()
      set(_arr ${CMAKE_MATCH_1})
      set(_min ${CMAKE_MATCH_2})
      string(REPLACE "," ";" _keys "${CMAKE_MATCH_3}")
      string(JSON _n ERROR_VARIABLE _jerr LENGTH "${_out}" ${_arr})
      if(_jerr OR _n LESS _min)
        message(FATAL_ERROR "JSON \"${_arr}\" holds ${_n} entries, expected at least ${_min}\n${_ctx}")
      endif()
      if(_n EQUAL 0)
        continue()
      endif()
      math(EXPR _lastidx "${_n} - 1")
      foreach(_i RANGE 0 ${_lastidx})
        foreach(_k IN LISTS _keys)
          string(JSON _v ERROR_VARIABLE _jerr GET "${_out}" ${_arr} ${_i} ${_k})
          if(_jerr)
            message(FATAL_ERROR "JSON ${_arr}[${_i}] lacks \"${_k}\"\n${_ctx}")
          endif()
        endforeach()
      endforeach()
    endforeach()
  endif()
  return()
endif()

# ---- the tests ---------------------------------------------------------------
if(NOT TARGET wq_bench)
  return()
endif()

set(_wqb_checker "${CMAKE_CURRENT_LIST_FILE}")
set(_wqb_snapdir "${CMAKE_CURRENT_BINARY_DIR}/bench_snapshots")

# wq_bench_test(NAME ARGS "..." [EXPECT_RC n] [STDOUT re...] [STDERR re...]
#               [JSON spec...] [SNAPSHOT kind:dir] [BIN target])
# BIN runs another of the bench programs (default wq_bench).
function(wq_bench_test name)
  cmake_parse_arguments(T "" "ARGS;EXPECT_RC;SNAPSHOT;BIN" "STDOUT;STDERR;JSON" ${ARGN})
  if(NOT T_BIN)
    set(T_BIN wq_bench)
  endif()
  set(defs -DBENCH=$<TARGET_FILE:${T_BIN}> "-DARGS=${T_ARGS}")
  if(DEFINED T_EXPECT_RC)
    list(APPEND defs -DEXPECT_RC=${T_EXPECT_RC})
  endif()
  foreach(k STDOUT STDERR JSON)
    if(T_${k})
      list(JOIN T_${k} "@@" joined)
      list(APPEND defs "-D${k}=${joined}")
    endif()
  endforeach()
  if(T_SNAPSHOT)
    list(APPEND defs "-DSNAPSHOT=${T_SNAPSHOT}")
  endif()
  add_test(NAME bench_${name} COMMAND ${CMAKE_COMMAND} ${defs} -P ${_wqb_checker})
  set_tests_properties(bench_${name} PROPERTIES TIMEOUT 300 LABELS bench)
endfunction()

set(_wqb_tiny "--quick --items 200 --warmup 20")
set(_wqb_num "[0-9]+")
set(_wqb_row "+${_wqb_num} items/sec  p50=${_wqb_num} +p90=${_wqb_num} +p95=${_wqb_num} +ns  rt_p50=${_wqb_num} +rt_p99=${_wqb_num} +ns  workers=${_wqb_num}")
set(_wqb_kernel_keys scope,items_per_sec,p50_ns,p90_ns,p95_ns,rt_p50_ns,rt_p99_ns,workers,ok)

wq_bench_test(kernel_prints_a_row_per_scope_in_kernel_order
  ARGS "${_wqb_tiny}"
  STDOUT "kernel protocol \\(test_workqueue\\)"
         "\ncpu ${_wqb_row}[^\n]*\nsmt ${_wqb_row}[^\n]*\ncache_shard ${_wqb_row}[^\n]*\ncache ${_wqb_row}[^\n]*\nnuma ${_wqb_row}[^\n]*\nsystem ${_wqb_row}")

wq_bench_test(kernel_json_has_one_result_per_scope_with_medians
  ARGS "${_wqb_tiny} --json --scopes cpu,system --repeat 2"
  JSON "results=2:${_wqb_kernel_keys},runs,items_per_sec_min,items_per_sec_max")

wq_bench_test(percpu_runs_the_kernel_protocol_on_a_per_cpu_workqueue
  ARGS "${_wqb_tiny} --percpu --json"
  JSON "results=1:${_wqb_kernel_keys}"
  STDOUT "\"scope\":\"percpu\"")

wq_bench_test(shard_sizes_sweep_reports_pods_per_size
  ARGS "${_wqb_tiny} --scopes cache_shard --shard-sizes 1,2,4 --json"
  JSON "shard_sweep=3:shard_size,pods,items_per_sec,p50_ns,p95_ns,workers,ok")

wq_bench_test(ab_wake_prints_baseline_patched_gain_and_p95_change
  ARGS "${_wqb_tiny} --scopes cpu,cache_shard --ab-wake"
  STDOUT "baseline/s +patched/s +gain +p95 base +p95 patch"
         "\ncpu +${_wqb_num} +${_wqb_num} +[-+][0-9.]+% +${_wqb_num} +${_wqb_num} +[-+][0-9.]+%"
         "\ncache_shard +${_wqb_num} +${_wqb_num} +[-+][0-9.]+%")

wq_bench_test(ab_wake_json_pairs_each_scope
  ARGS "${_wqb_tiny} --scopes cache_shard --ab-wake --json"
  JSON "ab_wake=1:scope,baseline_items_per_sec,patched_items_per_sec,gain_pct,p95_change_pct")

wq_bench_test(vs_puts_every_built_peer_and_the_limits_beside_cmwq
  ARGS "${_wqb_tiny} --scopes cache_shard --vs"
  STDOUT "peers, kernel protocol; ratio = peer items/sec / cmwq cache_shard"
         "\ncmwq cache_shard +${_wqb_num} +1.00x"
         "\nnaive mutex\\+condvar pool \\([0-9]+ threads\\) +${_wqb_num} +[0-9.]+x"
         "\nlimit: futex consumer, same CPU +${_wqb_num} +[0-9.]+x"
         "goals \\(for a 2-CPU VM")

wq_bench_test(all_protocols_with_peers_in_one_json_object
  ARGS "${_wqb_tiny} --json --scopes cache_shard --vs --protocol all --fanout-items 2000 --blocking-items 20 --regression-items 400 --max-active 8,64"
  JSON "results=1:${_wqb_kernel_keys}"
       "peers=3:peer,ok"
       "fanout=2:impl,items_per_sec,ns_per_queue,workers,ok"
       "blocking=3:impl,hints,wall_ms,peak_concurrency,peak_threads,workers,ok"
       "regression=3:impl,items_per_sec,peak_active,workers,ok"
       "skipped_peers=0:peer,reason"
       "goals=1:goal,met,detail")

wq_bench_test(fanout_runs_every_item
  ARGS "--protocol fanout --fanout-items 5000"
  STDOUT "fan-out: one producer on CPU ${_wqb_num} queues 5000 items"
         "\ncmwq \\(unbound wq\\) +${_wqb_num} +1.00x +[0-9.]+ +${_wqb_num}")

wq_bench_test(fanout_takes_a_max_active
  ARGS "--protocol fanout --fanout-items 3000 --fanout-max-active 2"
  STDOUT "\ncmwq \\(unbound wq, max_active 2\\) +${_wqb_num} +1.00x +[0-9.]+ +${_wqb_num}")

wq_bench_test(blocking_runs_with_and_without_hints_and_keeps_a_timeline
  ARGS "--protocol blocking --blocking-items 30 --timeline --json"
  JSON "blocking=2:impl,hints,wall_ms,peak_concurrency,peak_threads,workers,timeline_us,ok")

wq_bench_test(regression_compares_max_active_values
  ARGS "--protocol regression --regression-items 500 --max-active 8,768"
  STDOUT "\ncmwq, max_active 8 +${_wqb_num} +1.00x +${_wqb_num} +${_wqb_num} +${_wqb_num}"
         "\ncmwq, max_active 768 +${_wqb_num} +[0-9.]+x")

wq_bench_test(sysfs_root_runs_a_snapshot_that_fits_this_machine
  ARGS "${_wqb_tiny} --scopes cpu,system --sysfs-root ${_wqb_snapdir}/small"
  SNAPSHOT "small:${_wqb_snapdir}/small"
  STDOUT "pod layout: the sysfs snapshot .*/small"
         "\ncpu ${_wqb_row}"
         "\nsystem ${_wqb_row}")

wq_bench_test(sysfs_root_refuses_a_snapshot_with_more_cpus_than_usable
  ARGS "${_wqb_tiny} --sysfs-root ${_wqb_snapdir}/big"
  SNAPSHOT "big:${_wqb_snapdir}/big"
  EXPECT_RC 2
  STDERR "refusing --sysfs-root .*: the snapshot has ${_wqb_num} CPUs .* but this machine lets wq_bench use ${_wqb_num}")

wq_bench_test(sysfs_root_refuses_a_directory_that_is_not_sysfs
  ARGS "--sysfs-root ${CMAKE_CURRENT_SOURCE_DIR}"
  EXPECT_RC 2
  STDERR "refusing --sysfs-root .*devices/system/cpu does not exist")

wq_bench_test(bad_protocol_is_a_usage_error
  ARGS "--protocol nope"
  EXPECT_RC 2
  STDERR "accepted values are kernel, fanout, blocking, regression, all")

# ---- the other bench programs ------------------------------------------------
# wq_detect_bench: its three tables, the grace given as perf/G.
wq_bench_test(detect_bench_prints_latency_lock_and_idle_tables
  BIN wq_detect_bench
  ARGS "--rounds 5 --items 2000 --settings perf,perf/0,100:200"
  STDOUT "un-annotated blocking: latency"
         "\n100 +200 +${_wqb_num} +${_wqb_num} +${_wqb_num}"
         "nothing blocks: one CPU's pool"
         "\nsample +${_wqb_num} +[0-9.]+x")

wq_bench_test(detect_bench_refuses_a_bad_grace
  BIN wq_detect_bench
  ARGS "--rounds 1 --settings perf/abc"
  EXPECT_RC 2
  STDERR "bad grace in perf/abc: perf/G takes G in microseconds")

# wq_asio_bench (built where Boost.Asio is): every line of both protocols,
# tiny; a ring that loses a token never ends (the test's timeout), an echo
# client that fails prints 0.
if(TARGET wq_asio_bench)
  set(_asio_lines "")
  foreach(l "16 x asio::thread_pool\\(1\\)" "asio::thread_pool\\(2\\)" "cmwq unbound" "cmwq unbound, 16 executors"
            "cmwq per-CPU" "cmwq per-CPU, 16 executors" "cmwq ordered" "cmwq ordered, 16 executors"
            "cmwq per-CPU, 16 executors, block_detect=sample" "16 x asio::thread_pool\\(1\\) again")
    list(APPEND _asio_lines "\nactor  ${l} +[1-9][0-9]* hops/s")
  endforeach()
  foreach(l "asio::io_context on 2 threads" "asio::thread_pool\\(2\\)" "cmwq unbound" "cmwq per-CPU" "cmwq ordered"
            "cmwq unbound \\+ reactor" "cmwq per-CPU \\+ reactor" "asio::io_context on 2 threads again")
    list(APPEND _asio_lines "\necho   ${l} +[1-9][0-9]* round trips/s")
  endforeach()
  wq_bench_test(asio_bench_runs_every_line_of_both_protocols
    BIN wq_asio_bench
    ARGS "--protocol all --threads 2 --hops 2000 --actors 40 --clients 2 --round-trips 50 --repeat 1"
    STDOUT ${_asio_lines})
  # --only with a text ending in $: the first line and the one whose label
  # ends with it, not the block_detect=sample line that also contains it.
  wq_bench_test(asio_bench_only_with_a_dollar_takes_the_label_that_ends_so
    BIN wq_asio_bench
    ARGS "--protocol actor --threads 2 --hops 2000 --actors 40 --repeat 1 --only 'cmwq per-CPU, 16 executors$'"
    STDOUT "\nactor  16 x asio::thread_pool\\(1\\) +[1-9][0-9]* hops/s[^\n]*\nactor  cmwq per-CPU, 16 executors +[1-9][0-9]* hops/s[^\n]*\n*$")
  wq_bench_test(asio_bench_refuses_more_tokens_than_actors
    BIN wq_asio_bench
    ARGS "--protocol actor --actors 4 --tokens 5"
    EXPECT_RC 2
    STDERR "--tokens \\(5\\) must not exceed --actors \\(4\\)")
endif()
