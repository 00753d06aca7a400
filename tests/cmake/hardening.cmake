# Bounded JSON parsing (util/bounded_json), request caps (RequestLimits) and API-key checks.
add_executable(spark-hardening-tests
  unit/util/bounded_json_test.cpp
  unit/server/tool_call_depth_test.cpp)
target_link_libraries(spark-hardening-tests PRIVATE spark_server_lib GTest::gtest GTest::gtest_main spark_warnings)
gtest_discover_tests(spark-hardening-tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
