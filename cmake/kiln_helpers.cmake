# kiln_library(NAME SOURCES ... DEPS ...): a static library under src/, includes rooted at src/.
function(kiln_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# kiln_test(NAME SOURCES ... DEPS ...): a GoogleTest executable registered with CTest (each test
# case a CTest test; in the hardened build the whole program one), its own sources optimized at
# KILN_TEST_OPT_LEVEL (see the top-level CMakeLists.txt).
function(kiln_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_compile_options(${name} PRIVATE $<$<NOT:$<CONFIG:Debug>>:${KILN_TEST_OPT_LEVEL}>)
  if(KILN_FUZZ)
    # The hardened build runs each test program whole, as one CTest test: under ASan, starting a
    # test program once per test case cost 0.1-0.2 s each, most of `make sanitize`'s test time.
    # KILN_GTEST_EXCLUDE (a GoogleTest filter, scripts/hardened_build.sh) names the cases left out.
    add_test(NAME ${name} COMMAND ${name} "--gtest_filter=-${KILN_GTEST_EXCLUDE}")
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "KILN_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  else()
    include(GoogleTest)
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60
                         PROPERTIES ENVIRONMENT "KILN_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  endif()
endfunction()
