# kerncap_helpers.cmake: the two helpers every component uses to declare its
# libraries, binaries and tests (in the style of absl_cc_library).
#
#   kc_cc_library(NAME store SRCS a.cc b.cc HDRS a.h DEPS kerncap::common zstd)
#     -> static library target kc_store with ALIAS kerncap::store
#   kc_cc_binary(NAME kerncapd SRCS main.cc DEPS kerncap::store)
#   kc_cc_test(NAME pack_writer_test SRCS pack_writer_test.cc DEPS kerncap::store
#              [LABELS gpu;integration] [ENV VAR=value ...])
#     -> one gtest executable, registered with gtest_discover_tests so every
#        TEST() is its own ctest case. Tests that need hardware call GTEST_SKIP()
#        with a reason; ctest then reports them as skipped, never as passed.

include(GoogleTest)

function(kc_cc_library)
  cmake_parse_arguments(KC "" "NAME" "SRCS;HDRS;DEPS;PUBLIC_DEFS" ${ARGN})
  set(target kc_${KC_NAME})
  if(KC_SRCS)
    add_library(${target} STATIC ${KC_SRCS} ${KC_HDRS})
    target_link_libraries(${target} PUBLIC ${KC_DEPS} PRIVATE kerncap_warnings)
    target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    if(KC_PUBLIC_DEFS)
      target_compile_definitions(${target} PUBLIC ${KC_PUBLIC_DEFS})
    endif()
  else()
    add_library(${target} INTERFACE ${KC_HDRS})
    target_link_libraries(${target} INTERFACE ${KC_DEPS})
    target_include_directories(${target} INTERFACE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  endif()
  add_library(kerncap::${KC_NAME} ALIAS ${target})
endfunction()

function(kc_cc_binary)
  cmake_parse_arguments(KC "" "NAME;OUTPUT_NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${KC_NAME} ${KC_SRCS})
  target_link_libraries(${KC_NAME} PRIVATE ${KC_DEPS} kerncap_warnings)
  if(KC_OUTPUT_NAME)
    set_target_properties(${KC_NAME} PROPERTIES OUTPUT_NAME ${KC_OUTPUT_NAME})
  endif()
  set_target_properties(${KC_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
endfunction()

function(kc_cc_test)
  cmake_parse_arguments(KC "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS;ENV" ${ARGN})
  if(NOT KC_TIMEOUT)
    set(KC_TIMEOUT 300)
  endif()
  add_executable(${KC_NAME} ${KC_SRCS})
  target_link_libraries(${KC_NAME} PRIVATE ${KC_DEPS} GTest::gmock GTest::gtest_main kerncap_warnings)
  set_target_properties(${KC_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  set(labels unit)
  if(KC_LABELS)
    set(labels ${KC_LABELS})
  endif()
  gtest_discover_tests(${KC_NAME}
    DISCOVERY_MODE PRE_TEST
    PROPERTIES LABELS "${labels}" TIMEOUT ${KC_TIMEOUT} SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]"
               ENVIRONMENT "KERNCAP_BUILD_DIR=${PROJECT_BINARY_DIR};${KC_ENV}")
endfunction()
