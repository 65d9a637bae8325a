# Build helpers of reproducer/replay: embedding generated files (code objects
# for the GPU tests, the comparison kernel) into C++ sources, and nvcc rules.

# Embeds INPUT (a generated file, or nothing) as SYMBOL in OUT_CC.
function(kc_serve_embed SYMBOL INPUT OUT_CC)
  set(script ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/embed_file.cmake)
  if(INPUT)
    add_custom_command(OUTPUT ${OUT_CC}
      COMMAND ${CMAKE_COMMAND} -DINPUT=${INPUT} -DOUTPUT=${OUT_CC} -DSYMBOL=${SYMBOL} -P ${script}
      DEPENDS ${INPUT} ${script}
      COMMENT "Embedding ${INPUT}" VERBATIM)
  else()
    execute_process(COMMAND ${CMAKE_COMMAND} -DOUTPUT=${OUT_CC} -DSYMBOL=${SYMBOL} -P ${script})
  endif()
endfunction()

# Compiles SOURCE with nvcc (MODE -ptx or -cubin, ARCH compute_XX/sm_XX,
# extra flags after) into OUT.
function(kc_serve_nvcc OUT SOURCE MODE ARCH)
  add_custom_command(OUTPUT ${OUT}
    COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} ${MODE} -arch=${ARCH} -O3 -std=c++17
            -I${PROJECT_SOURCE_DIR} ${ARGN} ${SOURCE} -o ${OUT}
    DEPENDS ${SOURCE} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/serve/compare_abi.h
    COMMENT "nvcc ${MODE} ${ARCH} ${SOURCE} ${ARGN}" VERBATIM)
endfunction()

