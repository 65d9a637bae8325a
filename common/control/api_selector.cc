#include "common/control/api_selector.h"

namespace kerncap::link {

Selector SelectorFromProto(const v1::Selector& in, int64_t expires_unix_ms) {
  Selector s;
  s.kernel = in.kernel();
  switch (in.match()) {
    case v1::NAME_GLOB: s.match = NameMatch::kGlob; break;
    case v1::NAME_REGEX: s.match = NameMatch::kRegex; break;
    case v1::NAME_MANGLED: s.match = NameMatch::kMangled; break;
    default: s.match = NameMatch::kSubstring; break;
  }
  s.pid = in.pid();
  s.process_name = in.process_name();
  s.device = in.has_device() ? in.device() : -1;
  s.skip = in.skip();
  s.nth = in.nth();
  s.count = in.count();
  s.expires_unix_ms = expires_unix_ms;
  s.rank = in.has_rank() ? in.rank() : -1;
  switch (in.per_shape()) {
    case v1::PER_SHAPE_SCALARS: s.per_shape = PerShape::kScalars; break;
    case v1::PER_SHAPE_LAUNCH: s.per_shape = PerShape::kLaunch; break;
    default: s.per_shape = PerShape::kOff; break;
  }
  return s;
}

}  // namespace kerncap::link
