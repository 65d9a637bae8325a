// Forwarding header: the replay's replay_test_util.h lives in core/ now. Kept only
// for reproducer/generator, which includes the old path; remove once it
// includes reproducer/replay/core/replay_test_util.h.
#ifndef KERNCAP_REPRODUCER_REPLAY_REPLAY_TEST_UTIL_FORWARD_H_
#define KERNCAP_REPRODUCER_REPLAY_REPLAY_TEST_UTIL_FORWARD_H_
#include "reproducer/replay/core/replay_test_util.h"
#endif  // KERNCAP_REPRODUCER_REPLAY_REPLAY_TEST_UTIL_FORWARD_H_
