# wq_dump over the sysfs snapshots in data/topologies.
#
# Only the topology sections are deterministic, so the saved-output tests run
# `wq_dump --topology-only` and compare with data/wq_dump/<machine>.txt and
# .json (the snapshot's path is replaced by @SYSFS_ROOT@). The JSON is also
# checked against the snapshot's expected.json, for every scope and every
# cache_shard size, through CMWQ_PARAMS, so a saved file cannot drift from
# the reference. The full dump (pools, workqueues) is checked for its
# sections only. The file has two modes, like test_install.cmake: included by
# tests/CMakeLists.txt it registers the tests; run with `cmake -DSTEP=... -P`
# it performs one check. To refresh a saved file after an intended change,
# copy the `actual` file the failing test names over it and review the diff.

if(CMAKE_SCRIPT_MODE_FILE)
  # ---- script mode: one check ---------------------------------------------
  unset(ENV{CMWQ_PARAMS})
  unset(ENV{CMWQ_SYSFS_ROOT})

  # Runs wq_dump with the arguments given; `out` gets stdout with the
  # snapshot path replaced, and a non-zero exit is fatal.
  function(run_wq_dump out)
    execute_process(COMMAND ${RUNNER} ${WQ_DUMP} ${ARGN}
                    OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "wq_dump ${ARGN} exited with ${rc}\n"
        "CMWQ_SYSFS_ROOT=$ENV{CMWQ_SYSFS_ROOT} CMWQ_PARAMS=$ENV{CMWQ_PARAMS}\n"
        "stdout:\n${stdout}\nstderr:\n${stderr}")
    endif()
    string(REPLACE "${ROOT}" "@SYSFS_ROOT@" stdout "${stdout}")
    set(${out} "${stdout}" PARENT_SCOPE)
  endfunction()

  # "0-2,5" -> "0,1,2,5"
  function(expand_cpulist list out)
    set(cpus)
    string(REPLACE "," ";" ranges "${list}")
    foreach(r IN LISTS ranges)
      if(r MATCHES "^([0-9]+)-([0-9]+)$")
        foreach(cpu RANGE ${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
          list(APPEND cpus ${cpu})
        endforeach()
      else()
        list(APPEND cpus ${r})
      endif()
    endforeach()
    string(REPLACE ";" "," cpus "${cpus}")
    set(${out} "${cpus}" PARENT_SCOPE)
  endfunction()

  # The pods of `scope` in wq_dump's JSON, one "0,1,2" string per pod.
  function(json_pods json scope out)
    set(pods)
    string(JSON nr LENGTH "${json}" scopes ${scope})
    if(nr GREATER 0)
      math(EXPR last "${nr} - 1")
      foreach(i RANGE ${last})
        string(JSON nr_cpus LENGTH "${json}" scopes ${scope} ${i})
        math(EXPR last_cpu "${nr_cpus} - 1")
        set(cpus)
        foreach(j RANGE ${last_cpu})
          string(JSON cpu GET "${json}" scopes ${scope} ${i} ${j})
          list(APPEND cpus ${cpu})
        endforeach()
        string(REPLACE ";" "," cpus "${cpus}")
        list(APPEND pods "${cpus}")
      endforeach()
    endif()
    set(${out} "${pods}" PARENT_SCOPE)
  endfunction()

  # The pods of an expected.json array of cpulists, expanded like json_pods.
  function(expected_pods json out)
    set(pods)
    string(JSON nr LENGTH "${json}" ${ARGN})
    math(EXPR last "${nr} - 1")
    foreach(i RANGE ${last})
      string(JSON list GET "${json}" ${ARGN} ${i})
      expand_cpulist("${list}" cpus)
      list(APPEND pods "${cpus}")
    endforeach()
    set(${out} "${pods}" PARENT_SCOPE)
  endfunction()

  if(STEP STREQUAL "saved")
    # --topology-only output, human or JSON, equals the saved file. HOW says
    # whether the snapshot is given by CMWQ_SYSFS_ROOT or --sysfs-root.
    set(args --topology-only)
    if(MODE STREQUAL "json")
      list(APPEND args --json)
    endif()
    if(HOW STREQUAL "env")
      set(ENV{CMWQ_SYSFS_ROOT} "${ROOT}")
    else()
      list(APPEND args --sysfs-root "${ROOT}")
    endif()
    run_wq_dump(actual ${args})
    if(NOT EXISTS "${EXPECTED}")
      message(FATAL_ERROR "no saved output ${EXPECTED}")
    endif()
    file(READ "${EXPECTED}" expected)
    if(NOT actual STREQUAL expected)
      file(WRITE "${ACTUAL}" "${actual}")
      execute_process(COMMAND diff -u "${EXPECTED}" "${ACTUAL}" OUTPUT_VARIABLE diff)
      message(FATAL_ERROR "wq_dump ${args} differs from ${EXPECTED}\n"
        "actual output: ${ACTUAL}\n${diff}")
    endif()

  elseif(STEP STREQUAL "expected_json")
    # The pods wq_dump --json reports equal expected.json: every scope at
    # the default size, and cache_shard at every size it lists.
    file(READ "${EXPECTED}" expected)
    set(ENV{CMWQ_SYSFS_ROOT} "${ROOT}")
    run_wq_dump(actual --topology-only --json)
    string(JSON nr LENGTH "${actual}" online)
    math(EXPR last "${nr} - 1")
    set(online)
    foreach(i RANGE ${last})
      string(JSON cpu GET "${actual}" online ${i})
      list(APPEND online ${cpu})
    endforeach()
    string(REPLACE ";" "," online "${online}")
    string(JSON want GET "${expected}" online)
    expand_cpulist("${want}" want)
    if(NOT online STREQUAL want)
      message(FATAL_ERROR "online: wq_dump says ${online}, expected.json ${want}")
    endif()
    string(JSON size GET "${actual}" cache_shard_size)
    if(NOT size EQUAL 8)
      message(FATAL_ERROR "cache_shard_size ${size} without CMWQ_PARAMS, not 8")
    endif()
    foreach(scope cpu smt cache cache_shard numa system)
      json_pods("${actual}" ${scope} got)
      expected_pods("${expected}" want pods ${scope})
      if(NOT got STREQUAL want)
        message(FATAL_ERROR "${scope}: wq_dump gives pods\n  ${got}\nexpected.json\n  ${want}")
      endif()
    endforeach()
    string(JSON nr_sizes LENGTH "${expected}" cache_shard_by_size)
    math(EXPR last "${nr_sizes} - 1")
    foreach(i RANGE ${last})
      string(JSON size MEMBER "${expected}" cache_shard_by_size ${i})
      set(ENV{CMWQ_PARAMS} "workqueue.cache_shard_size=${size}")
      run_wq_dump(actual --topology-only --json)
      string(JSON got_size GET "${actual}" cache_shard_size)
      if(NOT got_size EQUAL size)
        message(FATAL_ERROR "CMWQ_PARAMS=$ENV{CMWQ_PARAMS}: wq_dump reports cache_shard_size ${got_size}")
      endif()
      json_pods("${actual}" cache_shard got)
      expected_pods("${expected}" want cache_shard_by_size ${size})
      if(NOT got STREQUAL want)
        message(FATAL_ERROR "cache_shard size ${size}: wq_dump gives pods\n  ${got}\n"
          "expected.json\n  ${want}")
      endif()
    endforeach()

  elseif(STEP STREQUAL "default_scope")
    # workqueue.default_affinity_scope moves the "(default)" mark.
    set(ENV{CMWQ_SYSFS_ROOT} "${ROOT}")
    run_wq_dump(out --topology-only)
    if(NOT out MATCHES "\nCACHE_SHARD \\(default\\)\n")
      message(FATAL_ERROR "cache_shard is not marked default:\n${out}")
    endif()
    set(ENV{CMWQ_PARAMS} "workqueue.default_affinity_scope=cache")
    run_wq_dump(out --topology-only)
    if(NOT out MATCHES "\nCACHE \\(default\\)\n" OR out MATCHES "CACHE_SHARD \\(default\\)")
      message(FATAL_ERROR "with $ENV{CMWQ_PARAMS} CACHE is not the one marked default:\n${out}")
    endif()
    run_wq_dump(out --topology-only --json)
    string(JSON scope GET "${out}" default_scope)
    if(NOT scope STREQUAL "cache")
      message(FATAL_ERROR "JSON default_scope is '${scope}', not 'cache'")
    endif()

  elseif(STEP STREQUAL "full")
    # The full dump has every section, and its JSON pools and workqueues.
    set(ENV{CMWQ_SYSFS_ROOT} "${ROOT}")
    run_wq_dump(out)
    foreach(section "Affinity Scopes" "Worker Pools" "Workqueue CPU -> pool"
                    "Workqueue -> rescuer" "Unbound workqueue -> node_nr/max_active")
      string(FIND "${out}" "${section}\n" at)
      if(at EQUAL -1)
        message(FATAL_ERROR "no section '${section}' in:\n${out}")
      endif()
    endforeach()
    run_wq_dump(out --json)
    foreach(key pools workqueues)
      string(JSON type ERROR_VARIABLE err TYPE "${out}" ${key})
      if(NOT type STREQUAL "ARRAY")
        message(FATAL_ERROR "JSON has no '${key}' array (${err}):\n${out}")
      endif()
    endforeach()
    string(JSON nr_pools LENGTH "${out}" pools)
    if(nr_pools EQUAL 0)
      message(FATAL_ERROR "the full JSON dump lists no pools:\n${out}")
    endif()

  elseif(STEP STREQUAL "bad_args")
    execute_process(COMMAND ${RUNNER} ${WQ_DUMP} --no-such-option
                    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 2 OR NOT err MATCHES "usage: wq_dump")
      message(FATAL_ERROR "an unknown option gave exit ${rc} and stderr:\n${err}")
    endif()
    # One grammar (CLI11): a missing value is named, -j is --json, and a tree
    # without a CPU topology is refused instead of giving a made-up machine.
    execute_process(COMMAND ${RUNNER} ${WQ_DUMP} --sysfs-root
                    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 2 OR NOT err MATCHES "--sysfs-root")
      message(FATAL_ERROR "--sysfs-root without a value gave exit ${rc} and stderr:\n${err}")
    endif()
    execute_process(COMMAND ${RUNNER} ${WQ_DUMP} --topology-only --sysfs-root /nonexistent
                    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 2 OR NOT err MATCHES "no CPU topology")
      message(FATAL_ERROR "--sysfs-root /nonexistent gave exit ${rc} and stderr:\n${err}")
    endif()
    execute_process(COMMAND ${RUNNER} ${WQ_DUMP} -j --topology-only --sysfs-root ${ROOT}
                    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "-j gave exit ${rc} and stderr:\n${err}")
    endif()
    string(JSON nr LENGTH "${out}" online)
    execute_process(COMMAND ${RUNNER} ${WQ_DUMP} --help OUTPUT_VARIABLE out RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0 OR NOT out MATCHES "Affinity Scopes" OR NOT out MATCHES "idle/workers")
      message(FATAL_ERROR "--help gave exit ${rc} without the legend:\n${out}")
    endif()

  else()
    message(FATAL_ERROR "unknown STEP '${STEP}'")
  endif()
  return()
endif()

# ---- configure mode: register the tests -------------------------------------

if(NOT TARGET wq_dump)
  message(STATUS "cmwq: wq_dump tests off (tools are not built)")
  return()
endif()

set(cmwq_wq_dump_script ${CMAKE_CURRENT_LIST_FILE})
set(cmwq_wq_dump_saved ${PROJECT_SOURCE_DIR}/data/wq_dump)
set(cmwq_wq_dump_actual ${CMAKE_BINARY_DIR}/wq_dump-actual)
file(MAKE_DIRECTORY ${cmwq_wq_dump_actual})

function(cmwq_wq_dump_test name step root)
  add_test(NAME ${name}
    COMMAND ${CMAKE_COMMAND} -DSTEP=${step} -DRUNNER=${CMWQ_TEST_RUNNER} -DWQ_DUMP=$<TARGET_FILE:wq_dump>
            -DROOT=${root} ${ARGN} -P ${cmwq_wq_dump_script})
  set_tests_properties(${name} PROPERTIES TIMEOUT 120)
endfunction()

file(GLOB cmwq_snapshots CONFIGURE_DEPENDS
  ${PROJECT_SOURCE_DIR}/data/topologies/*/expected.json)
foreach(expected ${cmwq_snapshots})
  get_filename_component(dir ${expected} DIRECTORY)
  get_filename_component(machine ${dir} NAME)
  set(root ${dir}/sys)
  cmwq_wq_dump_test(wq_dump.topology_matches_saved_output.${machine} saved ${root}
    -DMODE=human -DHOW=env -DEXPECTED=${cmwq_wq_dump_saved}/${machine}.txt
    -DACTUAL=${cmwq_wq_dump_actual}/${machine}.txt)
  cmwq_wq_dump_test(wq_dump.json_matches_saved_output.${machine} saved ${root}
    -DMODE=json -DHOW=arg -DEXPECTED=${cmwq_wq_dump_saved}/${machine}.json
    -DACTUAL=${cmwq_wq_dump_actual}/${machine}.json)
  cmwq_wq_dump_test(wq_dump.json_pods_match_expected_json_at_every_shard_size.${machine}
    expected_json ${root} -DEXPECTED=${expected})
endforeach()

set(cmwq_vm8 ${PROJECT_SOURCE_DIR}/data/topologies/vm-8/sys)
cmwq_wq_dump_test(wq_dump.default_scope_param_moves_the_default_mark default_scope
  ${PROJECT_SOURCE_DIR}/data/topologies/grace-72/sys)
cmwq_wq_dump_test(wq_dump.full_dump_has_every_section_and_json_pools full ${cmwq_vm8})
cmwq_wq_dump_test(wq_dump.unknown_option_fails_with_usage_and_help_has_legend bad_args ${cmwq_vm8})
