# spark-thread-pool-bench: what one ThreadPool::run costs beyond its work (a decode step runs hundreds).
add_executable(spark-thread-pool-bench ${CMAKE_CURRENT_LIST_DIR}/thread_pool_bench.cpp)
target_link_libraries(spark-thread-pool-bench PRIVATE spark_util CLI11::CLI11 spark_warnings)
