# Tokenizer: unit tests join spark-unit-tests (so the ASan build, which builds only that target, runs
# them too); the parity test compares with Hugging Face `tokenizers` from npm, installed on first run
# into the build tree (a failed install fails the test: the registry is reachable where tests run).
target_sources(spark-unit-tests PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/../unit/tokenizer/added_tokens_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../unit/tokenizer/bpe_model_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../unit/tokenizer/bpe_trainer_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../unit/tokenizer/decoder_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../unit/tokenizer/normalizer_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../unit/tokenizer/pre_tokenizer_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../unit/tokenizer/stream_detokenizer_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../unit/tokenizer/tokenizer_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../unit/tokenizer/tokenizer_variants_test.cpp
  ${CMAKE_CURRENT_LIST_DIR}/../unit/tokenizer/utf8_test.cpp)
target_include_directories(spark-unit-tests PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../unit/tokenizer)

add_test(NAME golden.tokenizer_parity
         COMMAND ${SPARK_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/../golden/tokenizer_parity_test.py
                 --bin-dir ${CMAKE_BINARY_DIR}/bin --work-dir ${CMAKE_BINARY_DIR}/golden-work
                 --source-dir ${CMAKE_SOURCE_DIR} --node-prefix ${CMAKE_BINARY_DIR}/node-tokenizer)
set_tests_properties(golden.tokenizer_parity PROPERTIES LABELS golden TIMEOUT 900)
