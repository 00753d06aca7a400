add_test(NAME bench.json_output
         COMMAND ${SPARK_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/bench/bench_json_test.py
                 --bin-dir ${CMAKE_BINARY_DIR}/bin --work-dir ${CMAKE_BINARY_DIR}/bench-work)
set_tests_properties(bench.json_output PROPERTIES LABELS golden TIMEOUT 300)

add_test(NAME bench.json_schema
         COMMAND ${SPARK_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/bench/bench_json_schema_test.py
                 --bin-dir ${CMAKE_BINARY_DIR}/bin --work-dir ${CMAKE_BINARY_DIR}/bench-schema-work)
set_tests_properties(bench.json_schema PROPERTIES LABELS golden TIMEOUT 300)

add_test(NAME bench.shared_prefix
         COMMAND ${SPARK_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/bench/bench_shared_prefix_test.py
                 --bin-dir ${CMAKE_BINARY_DIR}/bin --work-dir ${CMAKE_BINARY_DIR}/bench-prefix-work)
set_tests_properties(bench.shared_prefix PROPERTIES LABELS golden TIMEOUT 300)

add_test(NAME bench.profile
         COMMAND ${SPARK_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/bench/bench_profile_test.py
                 --bin-dir ${CMAKE_BINARY_DIR}/bin --work-dir ${CMAKE_BINARY_DIR}/bench-profile-work)
set_tests_properties(bench.profile PROPERTIES LABELS golden TIMEOUT 300)
