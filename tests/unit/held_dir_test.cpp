// HeldDir (harness/run/safe_files.h): a folder the exporters hold open, and what lies below
// it reached from the folder held, never through a link. The race it closes is made
// deterministic here: a name is swapped for a link to another folder AFTER the folder was
// opened, and the read must still go to the folder that was opened. Read by its path
// instead, the same name gives the other folder's marker: so the swap did happen.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "common/untrusted_file.h"
#include "harness/run/safe_files.h"
#include "test_support.h"

using cudatrace::HeldDir;
namespace fs = std::filesystem;

namespace {

std::string slurp(std::ifstream in) {
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void put(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

// base/a/f says "original"; secret/f (a 0700 folder) says "ROOT-ONLY-MARKER".
struct Folders {
  fs::path base = testsupport::temp_dir("held-base");
  fs::path secret = testsupport::temp_dir("held-secret");
  Folders() {
    fs::create_directory(base / "a");
    put(base / "a" / "f", "original");
    put(secret / "f", "ROOT-ONLY-MARKER");
    chmod(secret.c_str(), 0700);
  }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(HeldDir, SubfolderSwappedForALinkAfterItWasOpenedIsStillTheOneRead) {
  Folders d;
  const HeldDir top = HeldDir::open(d.base);
  const HeldDir a = top.sub("a");
  fs::rename(d.base / "a", d.base / "a-moved");  // the user's swap, after root opened it
  fs::create_directory_symlink(d.secret, d.base / "a");
  ASSERT_EQ(slurp(std::ifstream(d.base / "a" / "f")), "ROOT-ONLY-MARKER") << "by its path, the name now leads elsewhere";

  EXPECT_EQ(slurp(cudatrace::open_untrusted(a.path_of("f"))), "original");
  EXPECT_TRUE(fs::exists(fs::path(a.path_of()) / "f"));
  // Entered again from the folder held, the name is now a link: refused, in one line.
  const std::string why = error_of([&] { (void)top.sub("a"); });
  EXPECT_NE(why.find("is a link: not followed"), std::string::npos) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
  int err = 0;
  EXPECT_FALSE(top.try_sub("a", &err));
  EXPECT_EQ(err, ELOOP);
}

TEST(HeldDir, FolderGivenSwappedForALinkAfterItWasOpenedIsStillTheOneRead) {
  Folders d;
  const fs::path given = d.base / "a";
  const HeldDir a = HeldDir::open(given);
  fs::rename(given, d.base / "a-moved");
  fs::create_directory_symlink(d.secret, given);
  ASSERT_EQ(slurp(std::ifstream(given / "f")), "ROOT-ONLY-MARKER");
  EXPECT_EQ(slurp(cudatrace::open_untrusted(a.path_of("f"))), "original");
  EXPECT_EQ(a.names(), std::vector<std::string>{"f"});
  EXPECT_EQ(a.names(), std::vector<std::string>{"f"}) << "a second listing starts from the start";
}

// "link/" and "link/." would make open() follow the link: they name the link, and are refused.
TEST(HeldDir, FolderGivenAsALinkIsRefusedWithOrWithoutATrailingSlash) {
  Folders d;
  fs::create_directory_symlink(d.secret, d.base / "l");
  for (const std::string tail : {"", "/", "//", "/.", "/./"}) {
    const std::string why = error_of([&] { (void)HeldDir::open((d.base / "l").string() + tail); });
    EXPECT_NE(why.find("is a link: give the folder it names"), std::string::npos) << tail << ": " << why;
  }
  EXPECT_EQ(slurp(cudatrace::open_untrusted(HeldDir::open(d.base.string() + "/a/").path_of("f"))), "original");
  EXPECT_NE(error_of([&] { (void)HeldDir::open(d.base / "nope"); }).find("no such folder"), std::string::npos);
  EXPECT_NE(error_of([&] { (void)HeldDir::open(d.base / "a" / "f"); }).find("is not a folder"), std::string::npos);
}

TEST(HeldDir, NamesThatWouldWalkAreRefused) {
  Folders d;
  const HeldDir top = HeldDir::open(d.base);
  for (const std::string& name : std::vector<std::string>{"", ".", "..", "a/..", "../x", std::string("a\0b", 3)}) {
    int err = 0;
    EXPECT_FALSE(top.try_sub(name, &err)) << name;
    EXPECT_EQ(err, EINVAL) << name;
    EXPECT_THROW((void)top.path_of(name.empty() ? "/" : name), std::runtime_error) << name;
  }
  EXPECT_FALSE(top.has("../held-secret"));
  EXPECT_TRUE(top.has("a"));
}

TEST(HeldDir, FilesAreCreatedExclusivelyAndNeverThroughALink) {
  Folders d;
  const HeldDir a = HeldDir::open(d.base / "a");
  fs::create_symlink(d.secret / "f", d.base / "a" / "planted");
  EXPECT_THROW(close(a.create_file("planted")), cudatrace::WriteError);
  EXPECT_EQ(slurp(std::ifstream(d.secret / "f")), "ROOT-ONLY-MARKER");
  const std::string why = error_of([&] { close(a.create_file("f")); });
  EXPECT_NE(why.find("(it exists: not overwritten)"), std::string::npos) << why;
  EXPECT_NE(why.find((d.base / "a" / "f").string()), std::string::npos) << "named by the path given: " << why;
  EXPECT_TRUE(a.remove_file("planted")) << "the link itself goes, not what it names";
  EXPECT_TRUE(fs::exists(d.secret / "f"));
  EXPECT_FALSE(a.remove_file("planted"));
  const int fd = a.create_file("new", 0600);
  ASSERT_GE(fd, 0);
  close(fd);
  EXPECT_TRUE(fs::is_regular_file(d.base / "a" / "new"));
}

// Messages from readers given path_of() name the path the user gave, not /proc/self/fd/N.
TEST(HeldDir, MessagesNameThePathGiven) {
  Folders d;
  const HeldDir a = HeldDir::open(d.base / "a");
  const std::string fd_path = a.path_of();
  EXPECT_EQ(a.named(a.path_of("f") + ": bad; " + fd_path), (d.base / "a" / "f").string() + ": bad; " + (d.base / "a").string());
  EXPECT_EQ(a.named(fd_path + "7/x"), fd_path + "7/x") << "another descriptor's path is left as it is";
}

// Without /proc, path_of() would not lead to the folder held: the open fails in one line
// rather than fall back to reading by name. /proc is hidden in a mount namespace of a child.
TEST(HeldDir, WithoutProcTheOpenFailsRatherThanFollowLinks) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: hides /proc in a mount namespace";
  Folders d;
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipefd[0]);
    std::string why = "(no namespace)";
    if (unshare(CLONE_NEWNS) == 0 && mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
        mount("none", "/proc", "tmpfs", 0, nullptr) == 0)
      why = error_of([&] { (void)HeldDir::open(d.base / "a"); });
    (void)!write(pipefd[1], why.data(), why.size());
    _exit(0);
  }
  close(pipefd[1]);
  std::string why;
  char buf[512];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) why.append(buf, size_t(n));
  close(pipefd[0]);
  waitpid(pid, nullptr, 0);
  if (why == "(no namespace)") GTEST_SKIP() << "no mount namespace here";
  EXPECT_NE(why.find("/proc/self/fd does not lead back"), std::string::npos) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
}
