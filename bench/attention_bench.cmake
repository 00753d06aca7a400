# spark-attention-bench: the attention kernels alone on the KV cache's layout (prefill after a prefix,
# decode at depth).
add_executable(spark-attention-bench ${CMAKE_CURRENT_LIST_DIR}/attention_bench.cpp)
target_link_libraries(spark-attention-bench PRIVATE spark_kernels CLI11::CLI11 spark_warnings)
