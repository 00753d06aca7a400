# Grammar engine (src/grammar): regex, JSON Schema keywords, token masks against the slow reference.
target_sources(spark-unit-tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/../unit/grammar/regex_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../unit/grammar/json_schema_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../unit/grammar/matcher_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../unit/grammar/counted_string_tables_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../unit/grammar/tool_call_test.cpp)
target_link_libraries(spark-unit-tests PRIVATE spark_grammar)
