# kiln_library(NAME SOURCES ... DEPS ...): a static library under src/, includes rooted at src/.
function(kiln_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# kiln_test(NAME SOURCES ... DEPS ...): a GoogleTest executable registered with CTest, its own
# sources optimized at KILN_TEST_OPT_LEVEL (see the top-level CMakeLists.txt).
function(kiln_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_compile_options(${name} PRIVATE $<$<NOT:$<CONFIG:Debug>>:${KILN_TEST_OPT_LEVEL}>)
  include(GoogleTest)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60
                       PROPERTIES ENVIRONMENT "KILN_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endfunction()
