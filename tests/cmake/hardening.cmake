# Bounded JSON parsing (util/bounded_json), the admission gate and shared runs (single flight) of grammar
# compiles, request caps (RequestLimits), the byte-bounded grammar cache and API-key checks.
add_executable(spark-hardening-tests
  unit/util/admission_gate_test.cpp
  unit/util/single_flight_test.cpp
  unit/util/bounded_json_test.cpp
  unit/server/request_limits_test.cpp
  unit/server/access_control_test.cpp
  unit/server/tool_call_depth_test.cpp
  unit/server/grammar_cache_test.cpp
  unit/server/http_server_stop_test.cpp
  unit/server/http_front_test.cpp)
target_link_libraries(spark-hardening-tests PRIVATE spark_server_lib GTest::gtest GTest::gtest_main spark_warnings)
gtest_discover_tests(spark-hardening-tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)

# Fail fast at start-up (one error line, non-zero exit within a second, even under /health polling) and
# SIGTERM while loading: the real binary, driven from Python.
add_test(NAME server.startup_errors
         COMMAND ${SPARK_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/server/startup_errors_test.py
                 --bin-dir ${CMAKE_BINARY_DIR}/bin --work-dir ${CMAKE_BINARY_DIR}/server-work/startup)
set_tests_properties(server.startup_errors PROPERTIES LABELS server TIMEOUT 300)
