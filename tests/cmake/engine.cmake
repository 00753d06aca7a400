add_executable(spark-engine-tests unit/engine/engine_test.cpp unit/engine/prefix_cache_test.cpp
                                  unit/engine/sampler_test.cpp)
target_link_libraries(spark-engine-tests PRIVATE spark_engine GTest::gtest GTest::gtest_main spark_warnings)
gtest_discover_tests(spark-engine-tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
