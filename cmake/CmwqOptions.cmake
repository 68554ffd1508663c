# One place for warnings and sanitizers.
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  set(CMWQ_WARNINGS -Wall -Wextra -Wshadow-uncaptured-local -Wno-missing-field-initializers)
else()
  set(CMWQ_WARNINGS -Wall -Wextra -Wshadow=local -Wno-missing-field-initializers)
endif()
# CMWQ_THREAD_SAFETY (clang): the engine's lock rules (GUARDED_BY, REQUIRES in
# src/engine/internal.h and src/engine/engine.h) checked by the compiler, violations fatal.
option(CMWQ_THREAD_SAFETY "Check the engine's lock annotations (clang only)" OFF)
if(CMWQ_THREAD_SAFETY AND NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "CMWQ_THREAD_SAFETY=ON needs clang (CMAKE_CXX_COMPILER=clang++)")
endif()

if(CMWQ_SANITIZE)
  if(NOT CMWQ_SANITIZE MATCHES "^(thread|address|undefined)$")
    message(FATAL_ERROR "CMWQ_SANITIZE=${CMWQ_SANITIZE}: accepted values are thread, address, undefined")
  endif()
  add_compile_options(-fsanitize=${CMWQ_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${CMWQ_SANITIZE})
endif()

function(cmwq_target_defaults target)
  target_compile_options(${target} PRIVATE ${CMWQ_WARNINGS})
endfunction()
