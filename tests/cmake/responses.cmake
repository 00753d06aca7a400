# The Responses API's request conversion and response store (src/server/responses_request.*,
# response_store.*), and the single-call filter parallel_tool_calls: false sets on a choice's output: no HTTP,
# no model.
add_executable(spark-responses-tests
  unit/server/responses_request_test.cpp
  unit/server/response_store_test.cpp
  unit/server/choice_stream_test.cpp)
target_link_libraries(spark-responses-tests PRIVATE spark_server_lib GTest::gtest GTest::gtest_main spark_warnings)
gtest_discover_tests(spark-responses-tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
