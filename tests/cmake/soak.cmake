# A short soak (tests/soak/soak.mjs, run at length by tools/soak.sh): 20 s of mixed concurrent clients and a
# small connection flood against the demo checkpoint, then the leak and status checks.
add_test(NAME soak.smoke
         COMMAND ${SPARK_NODE} ${CMAKE_CURRENT_LIST_DIR}/../soak/soak.mjs --bin ${CMAKE_BINARY_DIR}/bin
                 --seconds 20 --clients 16 --flood 150)
set_tests_properties(soak.smoke PROPERTIES LABELS server TIMEOUT 300
                     ENVIRONMENT "SPARK_CACHE_DIR=${CMAKE_BINARY_DIR}/server-work/soak-cache")
