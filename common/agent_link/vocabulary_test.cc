// The link's enumerations: every name table is complete and unambiguous, the
// names are the ones the protocol has always used (agents and daemons of
// other versions must keep understanding each other), and an unknown name
// fails the frame instead of turning into a default.
#include "common/agent_link/vocabulary.h"

#include <set>
#include <string>

#include "common/agent_link/messages.h"
#include "gtest/gtest.h"

namespace kerncap::link {
namespace {

template <typename E>
void ExpectTableSound(const char* what) {
  std::set<std::string_view> names;
  std::set<int> values;
  for (const WireNameEntry<E>& e : WireNames(E{})) {
    EXPECT_TRUE(names.insert(e.name).second) << what << ": name '" << e.name << "' twice";
    EXPECT_TRUE(values.insert(static_cast<int>(e.value)).second)
        << what << ": value " << static_cast<int>(e.value) << " twice";
    E parsed{};
    ASSERT_TRUE(ParseWireName(e.name, &parsed)) << what << " " << e.name;
    EXPECT_EQ(parsed, e.value) << what << " " << e.name;
    EXPECT_EQ(WireName(e.value), e.name) << what;
    for (char c : e.name) {
      EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')
          << what << ": '" << e.name << "' is not a lower-case name";
    }
  }
  E untouched = static_cast<E>(-7);
  EXPECT_FALSE(ParseWireName("no_such_name", &untouched));
  EXPECT_EQ(static_cast<int>(untouched), -7) << what << ": a refused name must not set the value";
  EXPECT_EQ(WireName(static_cast<E>(-7)), "?") << what;
}

TEST(VocabularyTest, EveryTableIsSound) {
  ExpectTableSound<NameMatch>("NameMatch");
  ExpectTableSound<Platform>("Platform");
  ExpectTableSound<RegionKind>("RegionKind");
  ExpectTableSound<ImageKind>("ImageKind");
  ExpectTableSound<CodeObjectFormat>("CodeObjectFormat");
  ExpectTableSound<ArgumentKind>("ArgumentKind");
  ExpectTableSound<CapturePath>("CapturePath");
  ExpectTableSound<DisarmReason>("DisarmReason");
  ExpectTableSound<RingRequestReason>("RingRequestReason");
  ExpectTableSound<RingReleaseReason>("RingReleaseReason");
  ExpectTableSound<SubstitutionState>("SubstitutionState");
  ExpectTableSound<UnsubstituteReason>("UnsubstituteReason");
  ExpectTableSound<TextureObjectType>("TextureObjectType");
  ExpectTableSound<TextureResourceType>("TextureResourceType");
}

// The names on the wire are the protocol's: these are the strings older
// agents and daemons send and expect.
TEST(VocabularyTest, NamesAreTheProtocolsStrings) {
  EXPECT_EQ(WireName(RegionKind::kDeviceVmm), "device_vmm");
  EXPECT_EQ(WireName(RegionKind::kHostPinned), "host_pinned");
  EXPECT_EQ(WireName(RegionKind::kModuleGlobal), "module_global");
  EXPECT_EQ(WireName(RegionKind::kKernarg), "kernarg");
  EXPECT_EQ(WireName(Platform::kCuda), "cuda");
  EXPECT_EQ(WireName(Platform::kUnspecified), "");
  EXPECT_EQ(WireName(CodeObjectFormat::kHsaco), "hsaco");
  EXPECT_EQ(WireName(CapturePath::kDeviceSnapshot), "device_snapshot");
  EXPECT_EQ(WireName(TextureResourceType::kPitch2D), "pitch2d");
  EXPECT_EQ(WireName(TextureResourceType::kMipmappedArray), "mipmapped_array");
  EXPECT_EQ(WireName(SubstitutionState::kRefused), "refused");
  EXPECT_EQ(WireName(DisarmReason::kExpired), "expired");
  EXPECT_EQ(WireName(RingReleaseReason::kRevoked), "revoked");
  EXPECT_EQ(WireName(RingRequestReason::kCapture), "capture");
}

TEST(VocabularyTest, MessagesCarryNamesBothWays) {
  RegionBeginMsg region;
  region.token = 5;
  region.image = ImageKind::kPost;
  region.kind = RegionKind::kManaged;
  Frame frame;
  frame.type = MessageType::kRegionBegin;
  frame.json = EncodeBody(region);
  EXPECT_NE(frame.json.find(R"("image":"post")"), std::string::npos) << frame.json;
  EXPECT_NE(frame.json.find(R"("kind":"managed")"), std::string::npos) << frame.json;
  RegionBeginMsg back;
  ASSERT_TRUE(DecodeBody(frame, &back).ok());
  EXPECT_EQ(back.image, ImageKind::kPost);
  EXPECT_EQ(back.kind, RegionKind::kManaged);

  // Left out: the documented defaults.
  frame.json = R"({"token":5})";
  ASSERT_TRUE(DecodeBody(frame, &back).ok());
  EXPECT_EQ(back.image, ImageKind::kPre);
  EXPECT_EQ(back.kind, RegionKind::kDevice);
}

TEST(VocabularyTest, UnknownOrMistypedNamesFailTheFrame) {
  Frame frame;
  frame.type = MessageType::kRegionBegin;
  RegionBeginMsg msg;
  frame.json = R"({"token":5,"kind":"gpu_magic"})";
  LinkStatus st = DecodeBody(frame, &msg);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("region kind 'gpu_magic' is not one of: device, device_vmm"),
            std::string::npos)
      << st.message();
  frame.json = R"({"token":5,"image":1})";
  st = DecodeBody(frame, &msg);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("image is not a string"), std::string::npos) << st.message();
  // An over-long hostile name is cut in the message.
  frame.json = R"({"token":5,"kind":")" + std::string(5000, 'x') + R"("})";
  st = DecodeBody(frame, &msg);
  ASSERT_FALSE(st.ok());
  EXPECT_LT(st.message().size(), 400u);

  frame.type = MessageType::kHello;
  HelloMsg hello;
  frame.json = R"({"pid":1,"platform":"opencl"})";
  st = DecodeBody(frame, &hello);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("platform 'opencl'"), std::string::npos) << st.message();
  frame.json = R"({"pid":1,"platform":""})";
  ASSERT_TRUE(DecodeBody(frame, &hello).ok());
  EXPECT_EQ(hello.platform, Platform::kUnspecified);
}

}  // namespace
}  // namespace kerncap::link
