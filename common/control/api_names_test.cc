#include "common/control/api_names.h"

#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"
#include "kerncap/v1/control.pb.h"
#include "kerncap/v1/manifest.pb.h"

namespace kerncap::api {
namespace {

// Every value of every API enum has a short lowercase name, and the names of
// one enum are unique except where 0 means the same as a named value.
TEST(ApiNamesTest, EveryEnumValueHasAName) {
  auto enums = AllApiEnums();
  EXPECT_GE(enums.size(), 11u);
  for (const google::protobuf::EnumDescriptor* e : enums) {
    std::set<std::string> names;
    for (int i = 0; i < e->value_count(); ++i) {
      const int number = e->value(i)->number();
      std::string name(EnumName(e, number));
      ASSERT_FALSE(name.empty()) << e->value(i)->full_name() << " has no name in api_names.cc";
      EXPECT_EQ(name, absl::AsciiStrToLower(name));
      EXPECT_EQ(name.find('-'), std::string::npos) << name;
      if (!names.insert(name).second) {
        // Only a 0 that means the same as a named value may share its name,
        // and the name parses to the named value.
        EXPECT_NE(*EnumValue(e, name), 0) << "duplicate " << name << " in " << e->full_name();
      }
      EXPECT_TRUE(EnumValue(e, name).has_value());
    }
  }
}

TEST(ApiNamesTest, NamesFromTheIssue) {
  EXPECT_EQ(Name(v1::NAME_GLOB), "glob");
  EXPECT_EQ(Name(v1::REGION_DEVICE_VMM), "device_vmm");
  EXPECT_EQ(Name(v1::REGION_HOST_PINNED), "host_pinned");
  EXPECT_EQ(Name(v1::ARM_ACTIVE), "active");
  EXPECT_EQ(Name(v1::NAME_MATCH_UNSPECIFIED), "substring");
  EXPECT_EQ(Parse<v1::NameMatch>("substring"), v1::NAME_SUBSTRING);
  EXPECT_EQ(Parse<v1::RegionKind>("module_global"), v1::REGION_MODULE_GLOBAL);
  EXPECT_EQ(Parse<v1::RegionKind>("NAME_GLOB"), std::nullopt);
  EXPECT_EQ(Parse<v1::RegionKind>("device-vmm"), std::nullopt);
  std::vector<std::string> matches = EnumNames(v1::NameMatch_descriptor());
  EXPECT_EQ(matches, (std::vector<std::string>{"substring", "glob", "regex", "mangled"}));
}

// An address field that is renamed or removed from the proto would silently
// print as a number again: every listed name must resolve to a uint64 field.
TEST(ApiNamesTest, AddressFieldsExist) {
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  v1::CaptureManifest force_link;
  for (const std::string& name : AddressFieldNames()) {
    const google::protobuf::FieldDescriptor* f = pool->FindFieldByName(name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(f->cpp_type(), google::protobuf::FieldDescriptor::CPPTYPE_UINT64) << name;
    EXPECT_TRUE(IsAddressField(f));
  }
  EXPECT_FALSE(IsAddressField(v1::Region::descriptor()->FindFieldByName("device")));
}

}  // namespace
}  // namespace kerncap::api
