# spark-kernels-bench: per-format, per-tier GEMM throughput at the Spark shapes beside the measured roofline.
add_executable(spark-kernels-bench ${CMAKE_CURRENT_LIST_DIR}/kernels_bench.cpp)
target_link_libraries(spark-kernels-bench PRIVATE spark_kernels CLI11::CLI11 spark_warnings)
