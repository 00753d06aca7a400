# libFuzzer harnesses (tests/fuzz), built only in the clang sanitizer build (SPARK_SANITIZE=ON with clang,
# see the top-level CMakeLists.txt), linked against the same ASan/UBSan-instrumented libraries as the unit
# tests. Each harness gets a short ctest (label `fuzz`) that replays its committed corpus (regression
# inputs of fixed bugs included) and then fuzzes for a few seconds; tools/fuzz.sh runs them for longer.
if(NOT SPARK_FUZZ)
  return()
endif()

set(SPARK_FUZZ_SECONDS 15 CACHE STRING "Seconds each fuzz ctest fuzzes after replaying its corpus")
add_custom_target(spark-fuzz-harnesses)

# spark_fuzz_harness(NAME LIBS...): tests/fuzz/NAME_fuzz.cpp -> spark-fuzz-NAME, ctest fuzz.NAME.
function(spark_fuzz_harness name)
  add_executable(spark-fuzz-${name} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/${name}_fuzz.cpp)
  target_include_directories(spark-fuzz-${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)
  target_link_libraries(spark-fuzz-${name} PRIVATE ${ARGN} spark_warnings)
  target_link_options(spark-fuzz-${name} PRIVATE -fsanitize=fuzzer)
  add_dependencies(spark-fuzz-harnesses spark-fuzz-${name})
  add_test(NAME fuzz.${name}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_harness.sh $<TARGET_FILE:spark-fuzz-${name}>
                   ${CMAKE_CURRENT_SOURCE_DIR}/fuzz ${name} ${CMAKE_BINARY_DIR}/fuzz-work/${name} ${SPARK_FUZZ_SECONDS})
  set_tests_properties(fuzz.${name} PROPERTIES LABELS fuzz TIMEOUT 300)
endfunction()

spark_fuzz_harness(request spark_openai_request)
spark_fuzz_harness(responses_request spark_openai_request)
spark_fuzz_harness(safetensors spark_model_files)
spark_fuzz_harness(model_config spark_model_files)
spark_fuzz_harness(tokenizer_json spark_tokenizer)
spark_fuzz_harness(tokenizer_encode spark_tokenizer)
spark_fuzz_harness(stream_detokenizer spark_tokenizer)
spark_fuzz_harness(chat_template spark_chat)
spark_fuzz_harness(tool_call spark_parsers)
spark_fuzz_harness(reasoning spark_parsers)
spark_fuzz_harness(grammar spark_grammar spark_tokenizer)
spark_fuzz_harness(grammar_bytes spark_grammar spark_tokenizer)
