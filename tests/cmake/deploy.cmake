# The deployment of deploy/: three spark-server replicas behind Debian's nginx (its config generated from
# deploy/nginx/spark-server.conf), on loopback: session affinity, failover on SIGKILL, drain on SIGTERM.
find_program(SPARK_NODE node REQUIRED)
find_program(SPARK_NGINX nginx PATHS /usr/sbin REQUIRED)
add_test(NAME deploy.nginx_replicas
         COMMAND ${SPARK_NODE} ${CMAKE_CURRENT_LIST_DIR}/../deploy/nginx_replicas.mjs --bin ${CMAKE_BINARY_DIR}/bin
                 --work ${CMAKE_BINARY_DIR}/deploy-work --nginx ${SPARK_NGINX})
set_tests_properties(deploy.nginx_replicas PROPERTIES LABELS server TIMEOUT 300)
