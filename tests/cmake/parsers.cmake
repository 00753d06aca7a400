# Output parsers and the tool-call constraint (src/server/parsers.cmake).
add_executable(spark-parsers-tests
  unit/server/reasoning_parser_test.cpp
  unit/server/tool_call_parser_test.cpp
  unit/server/tool_call_recovery_test.cpp
  unit/server/tool_call_constraint_test.cpp
  unit/server/tool_call_constraint_bench_test.cpp)
target_include_directories(spark-parsers-tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit/server)
target_link_libraries(spark-parsers-tests PRIVATE spark_parsers GTest::gtest GTest::gtest_main spark_warnings)
gtest_discover_tests(spark-parsers-tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
# The sanitizer pass of tools/run-tests.sh builds only spark-unit-tests; this makes it build these too.
add_dependencies(spark-unit-tests spark-parsers-tests)
