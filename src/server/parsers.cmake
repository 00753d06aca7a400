# Output parsers (reasoning split, tool calls): no HTTP dependency, so they are unit-tested on their own and
# shared by the streaming and non-streaming paths.
add_library(spark_parsers STATIC
  ${CMAKE_CURRENT_LIST_DIR}/reasoning_parser.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tool_call_parser.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tool_call_parser_json.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tool_call_parser_recovery.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tool_call_parser_tools.cpp)
target_link_libraries(spark_parsers PUBLIC nlohmann_json::nlohmann_json spark_util PRIVATE spark_warnings)
