# Cross-building cmwq for arm64 (aarch64) on a Debian x86-64 host:
#
#   bash scripts/setup.sh --arm64      # g++-aarch64-linux-gnu, qemu-user-static,
#                                      # arm64 GoogleTest through multiarch
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake
#   cmake --build build-arm64 -j
#   ctest --test-dir build-arm64       # runs the tests under qemu-aarch64-static
#
# Test programs run through CMAKE_CROSSCOMPILING_EMULATOR (user-mode qemu
# with the arm64 libraries of /usr/aarch64-linux-gnu and multiarch).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Headers and libraries: the cross sysroot and the arm64 multiarch paths
# first, then the host's arch-independent headers (CLI11, nlohmann-json, sdt.h).
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
find_program(CMWQ_QEMU_AARCH64 qemu-aarch64-static)
if(CMWQ_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${CMWQ_QEMU_AARCH64} -L /usr/aarch64-linux-gnu)
endif()
