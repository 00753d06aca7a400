# `spark-server grammar-check` (the MaskBench runner): hand-written cases with labelled verdicts, bad input,
# and the 338 MaskBench cases of ../shared when that folder is present.
add_test(NAME golden.grammar_check
         COMMAND ${SPARK_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/golden/grammar_check_test.py
                 --server $<TARGET_FILE:spark-server>
                 --make-checkpoint $<TARGET_FILE:spark-make-checkpoint>
                 --shared-dir ${CMAKE_SOURCE_DIR}/../shared)
set_tests_properties(golden.grammar_check PROPERTIES LABELS golden TIMEOUT 600)
