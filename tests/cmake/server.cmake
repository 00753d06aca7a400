# Black-box server tests: the real spark-server binary on 127.0.0.1, driven by the official `openai` npm
# client (Node's test runner). setup.sh installs the pinned packages next to copies of the test files.
find_program(SPARK_NODE node REQUIRED)
set(SPARK_SERVER_TEST_DIR ${CMAKE_BINARY_DIR}/server-tests)
add_test(NAME server.setup COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/server/setup.sh ${SPARK_SERVER_TEST_DIR})
set_tests_properties(server.setup PROPERTIES FIXTURES_SETUP server_node LABELS server TIMEOUT 300)
file(GLOB SPARK_SERVER_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/server/*.test.mjs)
foreach(test_file ${SPARK_SERVER_TESTS})
  get_filename_component(test_name ${test_file} NAME)
  string(REPLACE ".test.mjs" "" test_name ${test_name})
  add_test(NAME server.${test_name}
           COMMAND ${SPARK_NODE} --test --test-reporter=spec ${SPARK_SERVER_TEST_DIR}/${test_name}.test.mjs)
  set_tests_properties(server.${test_name} PROPERTIES
    FIXTURES_REQUIRED server_node LABELS server TIMEOUT 600
    ENVIRONMENT "SPARK_BIN_DIR=${CMAKE_BINARY_DIR}/bin;SPARK_WORK_DIR=${CMAKE_BINARY_DIR}/server-work")
endforeach()
