# A method whose half inside the program is a Python hook: its files and the helpers the hooks
# share (cudatrace_hook.py) copied into one folder, lib/cudatrace/<method>/, in the build tree
# (what the tests run) and in the install, since that one folder is all the harness puts on
# the program's PYTHONPATH.
function(cudatrace_python_hook method)
  foreach(file ${ARGN} ${PROJECT_SOURCE_DIR}/tracers/pyhook/cudatrace_hook.py)
    get_filename_component(name ${file} NAME)
    configure_file(${file} ${CUDATRACE_LIB_DIR}/${method}/${name} COPYONLY)
    install(FILES ${file} DESTINATION ${CUDATRACE_LIB_SUBDIR}/${method})
  endforeach()
endfunction()
