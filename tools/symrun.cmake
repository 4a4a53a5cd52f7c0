# symrun: the local launcher (included by the top-level CMakeLists.txt).
include(GNUInstallDirs)
find_package(Threads REQUIRED)

add_executable(symrun
               ${CMAKE_CURRENT_LIST_DIR}/symrun/main.cc
               ${CMAKE_CURRENT_LIST_DIR}/symrun/output.cc
               ${CMAKE_CURRENT_LIST_DIR}/symrun/setup.cc
               ${CMAKE_CURRENT_LIST_DIR}/symrun/spawn.cc
               ${CMAKE_CURRENT_LIST_DIR}/symrun/supervise.cc)
target_link_libraries(symrun PRIVATE symcomm Threads::Threads)
symcomm_install_program(symrun)

if(SYMCOMM_BUILD_TESTS)
  # Helpers of the cases (tests/launcher): symrun_helper reports how a process ended and
  # starts one with signals blocked; symrun_init is a rank that joins a communicator.
  add_executable(symrun_helper ${CMAKE_CURRENT_LIST_DIR}/../tests/launcher/symrun_helper.c)
  add_executable(symrun_init ${CMAKE_CURRENT_LIST_DIR}/../tests/launcher/symrun_init.c)
  target_link_libraries(symrun_init PRIVATE symcomm)
  # One script a concern, tests/launcher/symrun_<concern>_test.sh (their helpers and driver:
  # symrun_test_lib.sh), each case well under 20 s and bounded at 60 s by the script: room for
  # a few to hit that bound and still be reported.
  foreach(concern args env output faults signals joins)
    add_test(NAME launcher_symrun_${concern}
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/../tests/launcher/symrun_${concern}_test.sh
                     $<TARGET_FILE:symrun> --helper $<TARGET_FILE:symrun_helper>
                     --init $<TARGET_FILE:symrun_init>)
    set_tests_properties(launcher_symrun_${concern} PROPERTIES LABELS "unit" TIMEOUT 300
      ENVIRONMENT "SYMCOMM_BOOTSTRAP_ADDR=127.0.0.1")
  endforeach()
endif()
