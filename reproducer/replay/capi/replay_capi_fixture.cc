// replay_capi_fixture: writes the C API tests' synthetic capture
// (capi_test_fixture.h) for the Python tests.
//
//   replay_capi_fixture OUT.kcap [--rich] [--texture] [--golden-delta=N] [--write-ptx=PATH]
//
// --write-ptx also writes the kernel's PTX (for tests that launch it themselves).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "reproducer/replay/capi/capi_test_fixture.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s OUT.kcap [--rich] [--texture] [--golden-delta=N] "
                 "[--write-ptx=PATH]\n",
                 argv[0]);
    return 2;
  }
  kerncap::replay::testing::CapiFixtureOptions o;
  std::string ptx_path;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rich") {
      o.rich = true;
    } else if (a == "--texture") {
      o.rich = true;
      o.texture = true;
    } else if (a.rfind("--write-ptx=", 0) == 0) {
      ptx_path = a.substr(std::strlen("--write-ptx="));
    } else if (a.rfind("--golden-delta=", 0) == 0) {
      o.golden_delta = std::strtoull(a.c_str() + std::strlen("--golden-delta="), nullptr, 10);
    } else {
      std::fprintf(stderr, "%s: unknown argument %s\n", argv[0], a.c_str());
      return 2;
    }
  }
  absl::Status s = kerncap::replay::testing::WriteCapiFixture(argv[1], o);
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", argv[0], std::string(s.message()).c_str());
    return 1;
  }
  if (!ptx_path.empty()) {
    FILE* f = std::fopen(ptx_path.c_str(), "w");
    if (f == nullptr || std::fputs(kerncap::replay::testing::kAddOnePtx, f) < 0) {
      std::fprintf(stderr, "%s: cannot write %s\n", argv[0], ptx_path.c_str());
      if (f != nullptr) std::fclose(f);
      return 1;
    }
    std::fclose(f);
  }
  return 0;
}
