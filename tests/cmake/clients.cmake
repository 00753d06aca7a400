# The clients people build agents with, unchanged, against the real spark-server over the random-weight
# demo checkpoint: the official `openai` client (Responses API), @openai/agents, the Vercel AI SDK and
# LangChain JS (tests/clients, pinned by its package-lock.json). Structure comes from constrained decoding
# (forced tool calls, json_schema), so the tests assert validity, never content.
find_program(SPARK_NODE node REQUIRED)
set(SPARK_CLIENT_TEST_DIR ${CMAKE_BINARY_DIR}/client-tests)
add_test(NAME clients.setup COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/clients/setup.sh ${SPARK_CLIENT_TEST_DIR})
set_tests_properties(clients.setup PROPERTIES FIXTURES_SETUP client_node LABELS "server;clients" TIMEOUT 600)
file(GLOB SPARK_CLIENT_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/clients/*.test.mjs)
foreach(test_file ${SPARK_CLIENT_TESTS})
  get_filename_component(test_name ${test_file} NAME)
  string(REPLACE ".test.mjs" "" test_name ${test_name})
  add_test(NAME clients.${test_name}
           COMMAND ${SPARK_NODE} --test --test-reporter=spec ${SPARK_CLIENT_TEST_DIR}/${test_name}.test.mjs)
  set_tests_properties(clients.${test_name} PROPERTIES
    FIXTURES_REQUIRED client_node LABELS "server;clients" TIMEOUT 300
    ENVIRONMENT "SPARK_BIN_DIR=${CMAKE_BINARY_DIR}/bin;SPARK_WORK_DIR=${CMAKE_BINARY_DIR}/server-work")
endforeach()
