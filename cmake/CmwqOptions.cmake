# One place for warnings and sanitizers.
set(CMWQ_WARNINGS -Wall -Wextra -Wshadow=local -Wno-missing-field-initializers)

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
