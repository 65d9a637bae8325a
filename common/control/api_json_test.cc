#include "common/control/api_json.h"

#include "gtest/gtest.h"
#include "kerncap/v1/control.pb.h"
#include "kerncap/v1/manifest.pb.h"

namespace kerncap::api {
namespace {

TEST(ApiJsonTest, FollowsThePolicy) {
  v1::CaptureManifest m;
  m.set_created_unix_ms(1764000000123);  // int64: a number, not a string
  m.set_dispatch_index(18446744073709551615ull);
  v1::Region* r = m.mutable_pre()->add_regions();
  r->set_va(0x7F3A00000000ull);
  r->set_kind(v1::REGION_DEVICE_VMM);
  r->mutable_data()->set_size(1 << 20);
  r->mutable_data()->add_chunk_digests(std::string("\xab\x01\xff", 3));
  m.mutable_launch()->set_stream(0x10);
  m.mutable_launch()->add_grid(4);
  (*m.mutable_launch()->mutable_attributes())["max_threads"] = -1;
  (*m.mutable_tags())["run"] = "base";
  nlohmann::json j = ToJson(m);
  EXPECT_TRUE(j["created_unix_ms"].is_number_integer());
  EXPECT_EQ(j["created_unix_ms"].get<int64_t>(), 1764000000123);
  EXPECT_EQ(j["dispatch_index"].get<uint64_t>(), 18446744073709551615ull);
  const nlohmann::json& region = j["pre"]["regions"][0];
  EXPECT_EQ(region["va"], "0x7f3a00000000");
  EXPECT_EQ(region["kind"], "device_vmm");
  EXPECT_EQ(region["device"], 0);  // defaults are present
  EXPECT_EQ(region["data"]["size"], 1 << 20);
  EXPECT_EQ(region["data"]["chunk_digests"][0], "ab01ff");
  EXPECT_EQ(j["launch"]["stream"], "0x10");
  EXPECT_EQ(j["launch"]["grid"], nlohmann::json::array({4}));
  EXPECT_EQ(j["launch"]["attributes"]["max_threads"], -1);
  EXPECT_EQ(j["tags"]["run"], "base");
  EXPECT_FALSE(j.contains("graph"));  // unset message: left out
  EXPECT_EQ(j["source"], "unspecified");
}

TEST(ApiJsonTest, OneofMembersOnlyWhenChosen) {
  v1::Event e;
  e.set_unix_ms(5);
  e.mutable_arm_changed()->set_arm_id("arm-1");
  e.mutable_arm_changed()->set_state(v1::ARM_DONE);
  nlohmann::json j = ToJson(e);
  EXPECT_EQ(j["arm_changed"]["state"], "done");
  EXPECT_FALSE(j.contains("agent_joined"));
  EXPECT_EQ(j["unix_ms"], 5);
}

TEST(ApiJsonTest, UnknownEnumValueIsItsNumber) {
  v1::Region r;
  r.set_kind(static_cast<v1::RegionKind>(99));
  EXPECT_EQ(ToJson(r)["kind"], 99);
}

}  // namespace
}  // namespace kerncap::api
