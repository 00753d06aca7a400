# Run at build time (cmake -DSOURCE_DIR=... -DOUT=... -P git_commit.cmake): writes OUT with the commit the
# tree is at, "-dirty" added when tracked files differ from it, and only when that changed. Configure time
# named the commit of the last configure, so a rebuild after later commits reported the wrong one.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT commit)
  set(commit unknown)
else()
  execute_process(COMMAND git diff --quiet HEAD -- WORKING_DIRECTORY ${SOURCE_DIR} RESULT_VARIABLE dirty
                  ERROR_QUIET)
  if(NOT dirty EQUAL 0)
    string(APPEND commit "-dirty")
  endif()
endif()
set(text "// Written by tools/git_commit.cmake at build time.\nconst char* spark_git_commit() { return \"${commit}\"; }\n")
set(old "")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()
