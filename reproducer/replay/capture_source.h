// Forwarding header: the replay's capture_source.h lives in core/ now. Kept only
// for reproducer/generator, which includes the old path; remove once it
// includes reproducer/replay/core/capture_source.h.
#ifndef KERNCAP_REPRODUCER_REPLAY_CAPTURE_SOURCE_FORWARD_H_
#define KERNCAP_REPRODUCER_REPLAY_CAPTURE_SOURCE_FORWARD_H_
#include "reproducer/replay/core/capture_source.h"
#endif  // KERNCAP_REPRODUCER_REPLAY_CAPTURE_SOURCE_FORWARD_H_
