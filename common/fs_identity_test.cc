#include "common/fs_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace kerncap {
namespace {

constexpr uint32_t kOther = 41003;

class FsIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CanSwitchFsIdentity()) {
      GTEST_SKIP() << "needs root (CAP_SETUID/CAP_SETGID) to act as another user";
    }
    char tmpl[] = "/tmp/kc_fsid_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
    secret_ = dir_ + "/root-only";
    std::ofstream(secret_) << "secret";
    ASSERT_EQ(::chmod(secret_.c_str(), 0600), 0);
  }
  void TearDown() override {
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }
  static bool CanOpen(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) ::close(fd);
    return fd >= 0;
  }
  std::string dir_, secret_;
};

TEST_F(FsIdentityTest, AScopeActsWithTheOtherUsersRightsOnThisThreadOnly) {
  ASSERT_TRUE(CanOpen(secret_));
  {
    absl::StatusOr<ScopedFsIdentity> as = ScopedFsIdentity::Enter({kOther, kOther, {}});
    ASSERT_TRUE(as.ok()) << as.status();
    EXPECT_FALSE(CanOpen(secret_)) << "root's file opened with another user's rights";
    EXPECT_EQ(ThreadFsIdentity().uid, kOther);
    // A file made in the scope is that user's.
    const std::string made = dir_ + "/made";
    EXPECT_NE(::mkdir(made.c_str(), 0700), 0) << "created in a folder the user cannot write";
    // A thread started in the scope acts for the caller too (a new thread
    // copies the creating thread's credentials): the generator's workers.
    bool started_here_can = false;
    std::thread([&] { started_here_can = CanOpen(secret_); }).join();
    EXPECT_FALSE(started_here_can);
    {
      ScopedOwnFsIdentity own;  // the store's files are the daemon's
      EXPECT_TRUE(CanOpen(secret_));
    }
    EXPECT_FALSE(CanOpen(secret_));
  }
  EXPECT_TRUE(CanOpen(secret_));
  EXPECT_EQ(ThreadFsIdentity().uid, 0u);
  bool elsewhere = false;
  std::thread([&] { elsewhere = CanOpen(secret_); }).join();
  EXPECT_TRUE(elsewhere);
}

// execve resets the fsuid to the euid: a program run for a caller must be
// made to run as the caller.
TEST_F(FsIdentityTest, AProgramExecutedForTheCallerRunsAsTheCaller) {
  const std::string out = dir_ + "/id.txt";
  ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);
  absl::StatusOr<ScopedFsIdentity> as = ScopedFsIdentity::Enter({kOther, kOther, {}});
  ASSERT_TRUE(as.ok()) << as.status();
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!AdoptFsIdentityForExec()) ::_exit(126);
    const std::string cmd = "id -u > " + out + "; cat " + secret_ + " >> " + out + " 2>/dev/null";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, std::to_string(kOther) + "\n") << "the program ran as root or read root's file";
}

TEST(FsIdentityNoRootTest, AProcessThatCannotSwitchRefusesToActForAnotherUser) {
  if (CanSwitchFsIdentity()) GTEST_SKIP() << "runs as a user that cannot switch identities";
  absl::StatusOr<ScopedFsIdentity> as = ScopedFsIdentity::Enter({kOther, kOther, {}});
  ASSERT_FALSE(as.ok());
  EXPECT_NE(as.status().message().find("cannot act with the rights of uid"), std::string::npos);
  // Its own identity: fine.
  EXPECT_TRUE(ScopedFsIdentity::Enter(ProcessFsIdentity()).ok());
}

}  // namespace
}  // namespace kerncap
