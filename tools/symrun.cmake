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
  add_test(NAME launcher_symrun
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/../tests/launcher/symrun_test.sh
                   $<TARGET_FILE:symrun>)
  set_tests_properties(launcher_symrun PROPERTIES LABELS "unit" TIMEOUT 300)

  # Helpers of the cases below (tests/launcher): symrun_helper reports how a process ended
  # and starts one with signals blocked; symrun_init is a rank that joins a communicator.
  add_executable(symrun_helper ${CMAKE_CURRENT_LIST_DIR}/../tests/launcher/symrun_helper.c)
  add_executable(symrun_init ${CMAKE_CURRENT_LIST_DIR}/../tests/launcher/symrun_init.c)
  target_link_libraries(symrun_init PRIVATE symcomm)
  # name: cases of symrun_test.sh (each well under 20 s).
  foreach(group "signals:blocked_signals,blocked_sigterm,symrun_killed,dies_by_signal,sigquit"
                "leftovers:leftover_background"
                "output:stalled_stdout,stalled_output_sigterm"
                "joins:late_join,join_again,killed_rank_sockets"
                "fd_limit:fd_limit")
    string(REPLACE ":" ";" group ${group})
    list(GET group 0 name)
    list(GET group 1 cases)
    add_test(NAME launcher_symrun_${name}
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/../tests/launcher/symrun_test.sh
                     $<TARGET_FILE:symrun> --helper $<TARGET_FILE:symrun_helper>
                     --init $<TARGET_FILE:symrun_init> --cases ${cases})
    set_tests_properties(launcher_symrun_${name} PROPERTIES LABELS "unit" TIMEOUT 120
      ENVIRONMENT "SYMCOMM_BOOTSTRAP_ADDR=127.0.0.1")
  endforeach()
endif()
