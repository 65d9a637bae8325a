// link_client_test_fixture.h: the fixture of the agent-side link tests that
// speak to a StandInDaemon (agent/testing/standin_daemon.h): a temp dir for
// its socket, the client options that reach it, and a poll for what the
// client's thread does. Test-only.
#ifndef KERNCAP_AGENT_LINK_LINK_CLIENT_TEST_FIXTURE_H_
#define KERNCAP_AGENT_LINK_LINK_CLIENT_TEST_FIXTURE_H_

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include "agent/link/agent_link_client.h"
#include "gtest/gtest.h"

namespace kerncap::agent {

class StandInLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kc_link_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Socket() const { return dir_ + "/agent.sock"; }
  AgentLinkClientOptions Options() const {
    AgentLinkClientOptions o;
    o.socket_path = Socket();
    o.lazy_ring = true;
    o.initial_wait_ms = 0;
    o.retry_initial_ms = 10;
    o.identity.platform = link::Platform::kSynthetic;
    return o;
  }
  // True once `done` holds (polled every 10 ms, for at most 2 s).
  static bool WaitUntil(const std::function<bool()>& done) {
    for (int i = 0; i < 200; ++i) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return done();
  }
  std::string dir_;
};

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_LINK_LINK_CLIENT_TEST_FIXTURE_H_
