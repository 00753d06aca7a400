# Chat templates: the Jinja engine's unit tests and its parity with Python's jinja2 (Hugging Face settings).

# Unit tests join the shared unit-test binary so the sanitizer build (which builds spark-unit-tests) runs them.
target_sources(spark-unit-tests PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/chat/jinja_syntax_test.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/chat/jinja_semantics_test.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/chat/jinja_errors_test.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/unit/chat/chat_template_test.cpp)
target_link_libraries(spark-unit-tests PRIVATE spark_chat)

# A test-only CLI that renders JSON-lines cases in one process, driven by the parity test.
add_executable(spark-chat-render ${CMAKE_CURRENT_SOURCE_DIR}/golden/chat_template_render.cpp)
target_link_libraries(spark-chat-render PRIVATE spark_chat spark_warnings)

add_test(NAME golden.chat_template_parity
         COMMAND ${SPARK_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/golden/chat_template_parity_test.py
                 --renderer $<TARGET_FILE:spark-chat-render>
                 --shared-dir ${CMAKE_SOURCE_DIR}/../shared)
set_tests_properties(golden.chat_template_parity PROPERTIES LABELS golden TIMEOUT 600)
