# symcomm_install_program(TARGET...): installs programs into the bin directory with an RPATH
# of $ORIGIN/<bin to lib>, so that they find the installed libsymcomm without
# LD_LIBRARY_PATH, wherever the prefix is installed or moved. Libraries linked from outside
# the build tree (the CUDA toolkit's) keep their directories, as in the build tree.
file(RELATIVE_PATH SYMCOMM_BIN_TO_LIB "${CMAKE_INSTALL_FULL_BINDIR}" "${CMAKE_INSTALL_FULL_LIBDIR}")
function(symcomm_install_program)
  foreach(target ${ARGN})
    set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN/${SYMCOMM_BIN_TO_LIB}"
                          INSTALL_RPATH_USE_LINK_PATH ON)
    install(TARGETS ${target} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endforeach()
endfunction()
