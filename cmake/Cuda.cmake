# The CUDA backend (-DRINGLM_CUDA=ON): the static library ringlm_cuda from src/backends/cuda
# (*.cu kernels, *.cc host code), RINGLM_HAS_CUDA for the ops dispatch, and the GPU test binary
# ringlm_cuda_tests (tests/cuda/*_test.cc). Built for Hopper: sm_90a machine code (wgmma,
# setmaxnreg) plus compute_90 PTX that newer GPUs can compile at load time.

if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
# The -gencode flags below name the targets; CMake must not add its own.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES OFF)
endif()
# CUDA C++20: nvcc >= 12 supports it, but CMake 3.25 does not know nvcc's flag for it; telling it
# before enable_language lets the compile-feature check record cuda_std_20.
if(CMAKE_VERSION VERSION_LESS 3.26)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_EXTENSIONS OFF)

set(RINGLM_CUDA_GENCODE
    "-gencode=arch=compute_90a,code=sm_90a"
    "-gencode=arch=compute_90,code=compute_90")
# --threads=0: nvcc compiles the two targets of a .cu file in parallel (attention.cu: 93 s -> 62 s
# on 2 cores).
# nvcc's own warnings and the host compiler's on the host side of .cu files are errors.
# (-Wpedantic/-Wshadow/-Wconversion are left to the .cc files: nvcc's generated host code trips them.)
set(RINGLM_CUDA_WARNINGS --Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror)

file(GLOB RINGLM_CUDA_SOURCES CONFIGURE_DEPENDS
     ${CMAKE_SOURCE_DIR}/src/backends/cuda/*.cu ${CMAKE_SOURCE_DIR}/src/backends/cuda/*.cc)
add_library(ringlm_cuda STATIC ${RINGLM_CUDA_SOURCES})
target_compile_options(ringlm_cuda PRIVATE
  $<$<COMPILE_LANGUAGE:CXX>:${RINGLM_WARNINGS}>
  $<$<COMPILE_LANGUAGE:CUDA>:${RINGLM_CUDA_GENCODE} ${RINGLM_CUDA_WARNINGS} --expt-relaxed-constexpr
  --threads=0>)
# The static runtime: the binary runs wherever the driver is (the cuBLAS libraries stay shared).
target_link_libraries(ringlm_cuda PUBLIC ringlm_lib CUDA::cudart_static CUDA::cublas CUDA::cublasLt)

# ringlm_lib's ops dispatch calls the backend; the backend uses core/ and ops/ (a cycle CMake
# resolves for static libraries by repeating them on the link line).
target_compile_definitions(ringlm_lib PUBLIC RINGLM_HAS_CUDA)
target_link_libraries(ringlm_lib PUBLIC ringlm_cuda)

# bench/gemm_bench.cc: the decode GEMMs through cublasGemmEx vs every cuBLASLt heuristic algorithm
# and stream_gemm.
add_executable(gemm_bench ${CMAKE_SOURCE_DIR}/bench/gemm_bench.cc)
target_compile_options(gemm_bench PRIVATE ${RINGLM_WARNINGS})
target_link_libraries(gemm_bench PRIVATE ringlm_lib)

if(RINGLM_TESTS)
  find_package(GTest REQUIRED)
  file(GLOB RINGLM_CUDA_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/cuda/*_test.cc)
  add_executable(ringlm_cuda_tests ${RINGLM_CUDA_TEST_SOURCES})
  target_compile_options(ringlm_cuda_tests PRIVATE ${RINGLM_WARNINGS})
  target_include_directories(ringlm_cuda_tests PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  target_compile_definitions(ringlm_cuda_tests PRIVATE
    RINGLM_FIXTURES_DIR="${CMAKE_SOURCE_DIR}/tests/fixtures")
  target_link_libraries(ringlm_cuda_tests PRIVATE ringlm_lib GTest::gtest GTest::gtest_main)
  # Without a GPU (CI) every test skips; on the GPU machine scripts/gpu-check runs it.
  add_test(NAME ringlm_cuda_tests COMMAND ringlm_cuda_tests)
  set_tests_properties(ringlm_cuda_tests PROPERTIES LABELS cuda TIMEOUT 600)
endif()
