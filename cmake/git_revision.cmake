# cmake -DSOURCE=dir -DOUT=header -P git_revision.cmake
# Writes the source revision (git describe --always --dirty) into OUT at every build, and
# touches OUT only when it changed: results name the code that ran, not the code that was
# there when the build was first configured.
execute_process(COMMAND git describe --always --dirty --tags WORKING_DIRECTORY "${SOURCE}"
                OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT rev)
  set(rev unknown)
endif()
set(text "// Generated at build time by cmake/git_revision.cmake.\n#pragma once\n#define CUDATRACE_GIT_REV \"${rev}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUT}" "${text}")
endif()
