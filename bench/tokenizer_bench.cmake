# Tokenizer throughput benchmark (bench/tokenizer_bench.py runs it against Hugging Face `tokenizers`).
add_executable(spark-tokenizer-bench ${CMAKE_CURRENT_LIST_DIR}/tokenizer_bench.cpp)
target_link_libraries(spark-tokenizer-bench PRIVATE spark_tokenizer CLI11::CLI11 spark_warnings)
