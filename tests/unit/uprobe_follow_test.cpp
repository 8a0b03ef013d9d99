// What the uprobe method's load following reads, without root: the executable files of a
// process's maps, and what each file is to the method (libcuda, libcudart, cudart linked
// into it with or without symbols, nothing).
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>

#include "test_support.h"
#include "tracers/uprobe/probe_plan.h"
#include "tracers/uprobe/process_maps.h"

using namespace cudatrace;

namespace {

// A file opened for examine_file, closed at the end of the scope.
struct Opened {
  explicit Opened(const std::filesystem::path& p) : fd(open(p.c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~Opened() {
    if (fd >= 0) close(fd);
  }
  int fd;
};

FileRole role_of(const std::filesystem::path& p, size_t* functions = nullptr) {
  Opened f(p);
  EXPECT_GE(f.fd, 0) << p;
  const FileFinding found = examine_file(f.fd, p.string());
  if (functions) *functions = found.symbols.size();
  return found.role;
}

const std::filesystem::path kWorkloads = CUDATRACE_WORKLOAD_DIR;

}  // namespace

TEST(ProcessMaps, ExecutableFilesOncePerInodeWithoutSpecialMappings) {
  const char* maps =
      "55d0c0000000-55d0c0001000 r--p 00000000 08:01 1001 /usr/bin/python3.11\n"
      "55d0c0001000-55d0c0200000 r-xp 00001000 08:01 1001 /usr/bin/python3.11\n"
      "7f0000000000-7f0000100000 r-xp 00010000 103:02 2002 /opt/venv/lib/nvidia/cu13/lib/libcudart.so.13\n"
      "7f0000200000-7f0000300000 r-xp 00020000 103:02 2002 /opt/venv/lib/nvidia/cu13/lib/libcudart.so.13\n"
      "7f0000400000-7f0000500000 r-xp 00000000 08:01 3003 /tmp/x/libcuda.so.1 (deleted)\n"
      "7f0000600000-7f0000700000 rw-p 00000000 00:00 0 \n"
      "7f0000700000-7f0000701000 r-xp 00000000 00:00 0 [vdso]\n"
      "7f0000800000-7f0000900000 r-xp 00000000 08:01 4004 /path with spaces/libfoo.so\n"
      "garbage line\n";
  const auto files = executable_files(maps);
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[0].path, "/usr/bin/python3.11");
  EXPECT_EQ(files[0].start, 0x55d0c0001000u);
  EXPECT_EQ(files[1].path, "/opt/venv/lib/nvidia/cu13/lib/libcudart.so.13");
  EXPECT_EQ(files[1].dev_major, 0x103u);
  EXPECT_EQ(files[1].inode, 2002u);
  EXPECT_EQ(files[2].path, "/tmp/x/libcuda.so.1");
  EXPECT_TRUE(files[2].deleted);
  EXPECT_EQ(files[3].path, "/path with spaces/libfoo.so");
}

TEST(ProcessMaps, OpensTheMappedFileOfThisProcess) {
  std::string maps;
  ASSERT_TRUE(read_process_maps(getpid(), maps));
  const auto files = executable_files(maps);
  ASSERT_FALSE(files.empty());
  std::string why;
  const int fd = open_mapped_file(getpid(), files[0], why);
  ASSERT_GE(fd, 0) << why;
  close(fd);
  MappedFile wrong = files[0];
  wrong.inode += 1;
  wrong.start = wrong.end = 0;  // no such map_files entry: the path is tried, and refused
  EXPECT_EQ(open_mapped_file(getpid(), wrong, why), -1);
  EXPECT_NE(why.find("no longer the one mapped"), std::string::npos) << why;
}

TEST(ProbePlanRoles, EachKindOfFileIsToldApart) {
  size_t n = 0;
  EXPECT_EQ(role_of(CUDATRACE_TOOLKIT_CUDART, &n), FileRole::Runtime);
  EXPECT_GT(n, 300u);
  EXPECT_EQ(role_of(CUDATRACE_TOOLKIT_LIBCUDA, &n), FileRole::Driver);
  EXPECT_GT(n, 300u);
  EXPECT_EQ(role_of(kWorkloads / "libprivatert.so", &n), FileRole::RuntimeInside) << "cudart linked in, with symbols";
  EXPECT_EQ(role_of(kWorkloads / "vecadd.static"), FileRole::RuntimeInside);
  EXPECT_EQ(role_of(kWorkloads / "vecadd.shared"), FileRole::None) << "the shared runtime is another file";
  EXPECT_EQ(role_of("/bin/sh"), FileRole::None);

  const auto dir = testsupport::temp_dir("stripped");
  std::filesystem::copy_file(kWorkloads / "libprivatert.so", dir / "libprivatert.so");
  ASSERT_EQ(testsupport::run_command("strip --strip-all " + (dir / "libprivatert.so").string()).exit_code, 0);
  EXPECT_EQ(role_of(dir / "libprivatert.so"), FileRole::RuntimeStripped);
  // NVRTC's builtins hold CUDA's headers (cudaError_t's names among them), not cudart.
  const std::filesystem::path builtins = std::filesystem::path(CUDATRACE_TOOLKIT_CUDART).parent_path() /
                                         "libnvrtc-builtins.so";
  if (std::filesystem::exists(builtins)) EXPECT_EQ(role_of(builtins), FileRole::None) << builtins;
}

TEST(ProbePlanRoles, AddsAFileOnceAndSaysHowItWasFound) {
  ProbePlan plan;
  Opened f(CUDATRACE_TOOLKIT_CUDART);
  const FileFinding found = examine_file(f.fd, CUDATRACE_TOOLKIT_CUDART);
  ProbedFile* added = add_file_functions(plan, found, "/some/libcudart.so.13", "mapped by pid 7");
  ASSERT_NE(added, nullptr);
  EXPECT_EQ(added->first, 0u);
  EXPECT_EQ(added->count, plan.functions.size());
  EXPECT_GT(added->count, 300u);
  EXPECT_TRUE(plan.probed("runtime"));
  EXPECT_FALSE(plan.probed("driver"));
  ASSERT_EQ(plan.files.size(), 1u);
  const auto notes = plan.files_json();
  EXPECT_EQ(notes[0]["found"], "mapped by pid 7");
  EXPECT_EQ(notes[0]["layer"], "runtime");
  EXPECT_EQ(notes[0]["functions"], added->count);
  for (const auto& fn : plan.functions) ASSERT_EQ(fn.binary, "/some/libcudart.so.13");
  EXPECT_EQ(add_file_functions(plan, FileFinding{}, "/bin/sh", "x"), nullptr) << "nothing to probe in a None file";
  // A file whose every probe failed to attach does not make its layer observed.
  plan.files[0].failed = plan.files[0].count;
  EXPECT_FALSE(plan.probed("runtime"));
}
