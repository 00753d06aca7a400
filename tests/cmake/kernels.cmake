# Kernel tests: every GEMM, attention, activation and softmax kernel of every instruction-set tier against
# the scalar reference, the quantizers, the hardware probe and report. Tiers the CPU lacks report "skipped: CPU lacks ...".
# (gemm_float_test.cpp is built into spark-unit-tests by tests/CMakeLists.txt.)
add_executable(spark-kernels-tests
  unit/kernels/quantized_gemm_test.cpp
  unit/kernels/quantize_test.cpp
  unit/kernels/hw_report_test.cpp
  unit/kernels/attention_test.cpp
  unit/kernels/activation_test.cpp
  unit/kernels/softmax_test.cpp)
target_include_directories(spark-kernels-tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit/kernels)
target_link_libraries(spark-kernels-tests PRIVATE spark_kernels GTest::gtest GTest::gtest_main spark_warnings)
gtest_discover_tests(spark-kernels-tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit)
