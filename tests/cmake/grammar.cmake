# Grammar engine (src/grammar): regex, JSON Schema keywords, token masks against the slow reference.
target_sources(spark-unit-tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/../unit/grammar/regex_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../unit/grammar/json_schema_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../unit/grammar/matcher_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../unit/grammar/counted_string_tables_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../unit/grammar/tool_call_test.cpp)
target_link_libraries(spark-unit-tests PRIVATE spark_grammar)

# `spark-server grammar-check` (the MaskBench runner): hand-written cases with labelled verdicts, bad input,
# and the 338 MaskBench cases of ../shared when that folder is present.
add_test(NAME golden.grammar_check
         COMMAND ${SPARK_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/golden/grammar_check_test.py
                 --server $<TARGET_FILE:spark-server>
                 --make-checkpoint $<TARGET_FILE:spark-make-checkpoint>
                 --shared-dir ${CMAKE_SOURCE_DIR}/../shared)
set_tests_properties(golden.grammar_check PROPERTIES LABELS golden TIMEOUT 600)
