# Included by tracers/CMakeLists.txt before the method folders: finds what BPF programs need
# (clang -target bpf, `bpftool gen skeleton`, libbpf) and defines cudatrace_bpf_skeleton() for
# the methods whose folders hold a .bpf.c. Without any of it the eBPF methods are not built,
# and the harness lists them as such (with the packages to install).
find_program(CUDATRACE_CLANG NAMES clang clang-19 clang-16 clang-15 clang-14)
find_program(CUDATRACE_BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin)
find_path(CUDATRACE_LIBBPF_INCLUDE bpf/libbpf.h)
# Static archives: the GPU host has no libbpf, and maybe not libelf/zstd either.
find_library(CUDATRACE_LIBBPF_A NAMES libbpf.a)
find_library(CUDATRACE_LIBELF_A NAMES libelf.a)
find_library(CUDATRACE_LIBZ_A NAMES libz.a)
find_library(CUDATRACE_LIBZSTD_A NAMES libzstd.a)

set(cudatrace_bpf_missing "")
foreach(v CUDATRACE_CLANG CUDATRACE_BPFTOOL CUDATRACE_LIBBPF_INCLUDE CUDATRACE_LIBBPF_A CUDATRACE_LIBELF_A
          CUDATRACE_LIBZ_A CUDATRACE_LIBZSTD_A)
  if(NOT ${v})
    list(APPEND cudatrace_bpf_missing ${v})
  endif()
endforeach()

# Included, not a subdirectory: no return() here, it would end the including file.
if(cudatrace_bpf_missing)
  message(WARNING "eBPF methods not built, missing: ${cudatrace_bpf_missing} (ci/install-deps.sh installs clang, "
                  "bpftool, libbpf-dev, libelf-dev, zlib1g-dev, libzstd-dev)")
  set(CUDATRACE_HAVE_BPF OFF)
else()
  set(CUDATRACE_HAVE_BPF ON)
  set(CUDATRACE_BPF_SKELETON_DIR ${CMAKE_BINARY_DIR}/generated/bpf_skeletons)
  set(CUDATRACE_BPF_SHARED_DIR ${CMAKE_CURRENT_LIST_DIR})
  file(MAKE_DIRECTORY ${CUDATRACE_BPF_SKELETON_DIR})

  # cudatrace_bpf_skeleton(<name> [headers...]), called from a method's folder:
  # <name>.bpf.c there -> <name>.bpf.o -> <skeleton dir>/<name>.skel.h. The shared BPF
  # headers (this folder) are on its include path and in its dependencies.
  function(cudatrace_bpf_skeleton name)
    set(obj ${CMAKE_CURRENT_BINARY_DIR}/${name}.bpf.o)
    set(skel ${CUDATRACE_BPF_SKELETON_DIR}/${name}.skel.h)
    file(GLOB shared_headers ${CUDATRACE_BPF_SHARED_DIR}/*.bpf.h)
    add_custom_command(
      OUTPUT ${obj}
      COMMAND ${CUDATRACE_CLANG} -g -O2 -target bpf -D__TARGET_ARCH_x86 -Wall -Werror
              -I${CMAKE_CURRENT_SOURCE_DIR} -I${CUDATRACE_BPF_SHARED_DIR} -I/usr/include/${CMAKE_LIBRARY_ARCHITECTURE}
              -c ${CMAKE_CURRENT_SOURCE_DIR}/${name}.bpf.c -o ${obj}
      DEPENDS ${name}.bpf.c ${ARGN} ${shared_headers}
      COMMENT "BPF ${name}.bpf.c")
    add_custom_command(
      OUTPUT ${skel}
      COMMAND ${CUDATRACE_BPFTOOL} gen skeleton ${obj} name ${name}_bpf > ${skel}
      DEPENDS ${obj}
      COMMENT "BPF skeleton ${name}.skel.h")
    add_custom_target(${name}_skeleton DEPENDS ${skel})
  endfunction()

  # libbpf with everything it needs, linked statically into whoever loads BPF programs.
  add_library(cudatrace_libbpf INTERFACE)
  target_include_directories(cudatrace_libbpf INTERFACE ${CUDATRACE_LIBBPF_INCLUDE} ${CUDATRACE_BPF_SKELETON_DIR})
  target_link_libraries(cudatrace_libbpf INTERFACE ${CUDATRACE_LIBBPF_A} ${CUDATRACE_LIBELF_A} ${CUDATRACE_LIBZ_A}
                        ${CUDATRACE_LIBZSTD_A})
endif()
