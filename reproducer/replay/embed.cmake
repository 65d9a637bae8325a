# Build helpers of reproducer/replay: embedding generated files (code objects
# for the GPU tests, the comparison kernel) into C++ sources, and nvcc rules.

# Embeds INPUT (a generated file, or nothing) as SYMBOL (unsigned char) in
# OUT_CC, with common/cmake/embed_files.cmake, in the namespace given after
# OUT_CC (default kerncap::replay::serve).
function(kc_serve_embed SYMBOL INPUT OUT_CC)
  set(script ${PROJECT_SOURCE_DIR}/common/cmake/embed_files.cmake)
  set(ns kerncap::replay::serve)
  if(ARGC GREATER 3)
    set(ns ${ARGV3})
  endif()
  set(args -DSYMBOLS=${SYMBOL} -DNAMESPACE=${ns} -DUNSIGNED=ON -DOUTPUT=${OUT_CC})
  if(INPUT)
    add_custom_command(OUTPUT ${OUT_CC}
      COMMAND ${CMAKE_COMMAND} -DINPUTS=${INPUT} ${args} -P ${script}
      DEPENDS ${INPUT} ${script}
      COMMENT "Embedding ${INPUT}" VERBATIM)
  else()
    execute_process(COMMAND ${CMAKE_COMMAND} ${args} -P ${script})
  endif()
endfunction()

# Compiles SOURCE with nvcc (MODE -ptx or -cubin, ARCH compute_XX/sm_XX,
# extra flags after) into OUT.
function(kc_serve_nvcc OUT SOURCE MODE ARCH)
  add_custom_command(OUTPUT ${OUT}
    COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} ${MODE} -arch=${ARCH} -O3 -std=c++17
            -I${PROJECT_SOURCE_DIR} ${ARGN} ${SOURCE} -o ${OUT}
    DEPENDS ${SOURCE} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/core/compare_abi.h
    COMMENT "nvcc ${MODE} ${ARCH} ${SOURCE} ${ARGN}" VERBATIM)
endfunction()

