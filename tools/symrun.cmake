# symrun: the local launcher (included by the top-level CMakeLists.txt).
include(GNUInstallDirs)
find_package(Threads REQUIRED)

add_executable(symrun
               ${CMAKE_CURRENT_LIST_DIR}/symrun/main.cc
               ${CMAKE_CURRENT_LIST_DIR}/symrun/spawn.cc
               ${CMAKE_CURRENT_LIST_DIR}/symrun/supervise.cc)
target_link_libraries(symrun PRIVATE symcomm Threads::Threads)
install(TARGETS symrun RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

if(SYMCOMM_BUILD_TESTS)
  add_test(NAME launcher_symrun
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/../tests/launcher/symrun_test.sh
                   $<TARGET_FILE:symrun>)
  set_tests_properties(launcher_symrun PROPERTIES LABELS "unit" TIMEOUT 300)
endif()
