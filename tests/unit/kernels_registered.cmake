# Every CUDA source of the library registers its kernels to be loaded when a communicator is
# made (src/base/kernel_load.h): a .cu file without its KernelLibrary would leave its kernels
# to lazy loading at their first launch, which may wait for kernels that wait for their peers.
#   cmake -DSRC=<the library's src folder> -P kernels_registered.cmake
file(GLOB_RECURSE sources "${SRC}/*.cu")
list(LENGTH sources count)
if(count EQUAL 0)
  message(FATAL_ERROR "no .cu file under ${SRC}")
endif()
set(missing "")
foreach(f ${sources})
  file(READ "${f}" text)
  if(NOT text MATCHES "const KernelLibrary kKernels\\(")
    list(APPEND missing "${f}")
  endif()
endforeach()
if(missing)
  string(REPLACE ";" "\n  " missing "${missing}")
  message(FATAL_ERROR "these CUDA sources do not register their kernels (const KernelLibrary "
                      "kKernels(&some_kernel); base/kernel_load.h):\n  ${missing}")
endif()
message(STATUS "all ${count} CUDA sources register their kernels")
