# A short soak (tests/soak/soak.mjs, run at length by tools/soak.sh): 20 s of mixed concurrent clients and a
# small connection flood against the demo checkpoint, then the leak and status checks.
add_test(NAME soak.smoke
         COMMAND ${SPARK_NODE} ${CMAKE_CURRENT_LIST_DIR}/../soak/soak.mjs --bin ${CMAKE_BINARY_DIR}/bin
                 --seconds 20 --clients 16 --flood 150)
set_tests_properties(soak.smoke PROPERTIES LABELS server TIMEOUT 300
                     ENVIRONMENT "SPARK_CACHE_DIR=${CMAKE_BINARY_DIR}/server-work/soak-cache")

# A short connection flood (tests/soak/flood.mjs, run at 1,000 connections by tools/flood.sh): 300
# connections, a third idle, a third slow senders, a third real requests; fails if a real request waits
# more than 2 s for its answer, gets none, or the server dies.
add_test(NAME soak.flood_smoke
         COMMAND ${SPARK_NODE} ${CMAKE_CURRENT_LIST_DIR}/../soak/flood.mjs --bin ${CMAKE_BINARY_DIR}/bin
                 --connections 300 --server-args "--request-read-timeout 4")
set_tests_properties(soak.flood_smoke PROPERTIES LABELS server TIMEOUT 120
                     ENVIRONMENT "SPARK_CACHE_DIR=${CMAKE_BINARY_DIR}/server-work/soak-cache")
