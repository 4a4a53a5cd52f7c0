# Every CUDA source of the library registers its kernels to be loaded when a communicator is
# made (src/base/kernel_load.h): a .cu file without its KernelLibrary would leave its kernels
# to lazy loading at their first launch, which may wait for kernels that wait for their peers.
# A registration names one kernel of the unit, its anchor (the unit's CUDA library, all of its
# kernels, is loaded whole; gpu_kernel_load checks that on a GPU): checked here are that the
# registration is code, not a comment, and that its anchor is a __global__ function the file
# itself defines, or a header of its own folder (src/coll/relay/ for src/coll/relay.cu) (an
# anchor of another unit would load that unit's library instead).
#   cmake -DSRC=<the library's src folder> -P kernels_registered.cmake
cmake_minimum_required(VERSION 3.25)  # the project's: today's policies in script mode too

# `text` without its // and /* */ comments (each replaced by a space). The sources hold no
# comment markers inside string literals.
function(strip_comments text out)
  set(rest "${text}")
  set(kept "")
  while(TRUE)
    string(FIND "${rest}" "//" line)
    string(FIND "${rest}" "/*" block)
    if(line EQUAL -1 AND block EQUAL -1)
      break()
    endif()
    if(block EQUAL -1 OR (NOT line EQUAL -1 AND line LESS block))
      set(at ${line})
      set(close "\n")  # kept: the line ends
      set(skip 0)
    else()
      set(at ${block})
      set(close "*/")
      set(skip 2)
    endif()
    string(SUBSTRING "${rest}" 0 ${at} before)
    string(APPEND kept "${before} ")
    math(EXPR from "${at} + 2")
    string(SUBSTRING "${rest}" ${from} -1 rest)
    string(FIND "${rest}" "${close}" end)
    if(end EQUAL -1)
      set(rest "")
    else()
      math(EXPR end "${end} + ${skip}")
      string(SUBSTRING "${rest}" ${end} -1 rest)
    endif()
  endwhile()
  set(${out} "${kept}${rest}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE sources "${SRC}/*.cu")
list(LENGTH sources count)
if(count EQUAL 0)
  message(FATAL_ERROR "no .cu file under ${SRC}")
endif()
set(problems "")
set(ws "[ \t\r\n]")
foreach(f ${sources})
  file(READ "${f}" text)
  strip_comments("${text}" code)
  # const KernelLibrary kKernels(reinterpret_cast<const void*>(&anchor<...>));
  if(NOT code MATCHES "KernelLibrary${ws}+[A-Za-z_][A-Za-z0-9_]*${ws}*\\(([^;]*)\\)${ws}*;")
    list(APPEND problems "${f}: no KernelLibrary registration (outside comments)")
    continue()
  endif()
  set(args "${CMAKE_MATCH_1}")
  if(NOT args MATCHES "&${ws}*([A-Za-z_][A-Za-z0-9_]*)")
    list(APPEND problems "${f}: its KernelLibrary names no kernel (&some_kernel): ${args}")
    continue()
  endif()
  set(anchor "${CMAKE_MATCH_1}")
  # The unit's own device headers (<dir>/<unit>/*.cuh, which no other unit includes) may
  # define its kernels.
  get_filename_component(dir "${f}" DIRECTORY)
  get_filename_component(unit "${f}" NAME_WE)
  file(GLOB own "${dir}/${unit}/*.cuh")
  foreach(h ${own})
    file(READ "${h}" text)
    strip_comments("${text}" header)
    string(APPEND code "${header}")
  endforeach()
  # __global__ void [__launch_bounds__(...)] anchor(  (templates: template <...> before it)
  if(NOT code MATCHES "__global__[^;{}]*[^A-Za-z0-9_]${anchor}${ws}*\\(")
    list(APPEND problems
         "${f}: its KernelLibrary's anchor '${anchor}' is no __global__ function of the file "
         "or of its own headers (${unit}/*.cuh)")
  endif()
endforeach()
if(problems)
  string(REPLACE ";" "\n  " problems "${problems}")
  message(FATAL_ERROR "these CUDA sources do not register their kernels (const KernelLibrary "
                      "kKernels(reinterpret_cast<const void*>(&one_of_its_kernels)); "
                      "base/kernel_load.h):\n  ${problems}")
endif()
message(STATUS "all ${count} CUDA sources register one of their own kernels")
