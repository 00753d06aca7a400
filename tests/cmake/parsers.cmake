# Output parsers (src/server/parsers.cmake), and the tool-call grammar (src/grammar/tool_call.h) read back
# through the tool-call parser.
add_executable(spark-parsers-tests
  unit/server/reasoning_parser_test.cpp
  unit/server/tool_call_parser_test.cpp
  unit/server/tool_call_recovery_test.cpp
  unit/server/tool_call_grammar_test.cpp)
target_include_directories(spark-parsers-tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit/server)
target_link_libraries(spark-parsers-tests PRIVATE spark_parsers spark_grammar GTest::gtest GTest::gtest_main spark_warnings)
gtest_discover_tests(spark-parsers-tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
