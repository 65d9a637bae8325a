#include "format/chunk_read.h"

#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>
#if defined(__x86_64__)
// Debian's libxxhash also exports runtime-dispatched (AVX2 / AVX-512) entry
// points, and this header maps XXH3_64bits{,_update} to them; the plain ones
// are SSE2 only, which makes the checksum cost over half as much as the copy
// it guards.
#include <xxh_x86dispatch.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "format/codec.h"
#include "format/pack_format.h"

namespace kerncap::format {
namespace {

// Raw chunk data is read and hashed in pieces of this size: small enough that
// a piece is still in the core's L2 cache when it is hashed, large enough that
// the extra system calls cost nothing measurable.
constexpr size_t kRawPieceBytes = 256u << 10;

// Per-thread scratch memory that only grows (no zero-fill on reuse).
class Scratch {
 public:
  char* Get(size_t size) {
    if (size > capacity_) {
      data_.reset(new char[size]);
      capacity_ = size;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<char[]> data_;
  size_t capacity_ = 0;
};

XXH3_state_t* ThreadXxh3State() {
  thread_local std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> state(
      XXH3_createState(), &XXH3_freeState);
  return state.get();
}

// preadv until every iovec is full (the kernel may stop early, e.g. on a
// signal); consumes iov[0..count). A short file is DataLoss.
absl::Status PreadvAll(int fd, struct iovec* iov, int count, uint64_t offset) {
  auto drop_filled = [&] {
    while (count > 0 && iov->iov_len == 0) {
      ++iov;
      --count;
    }
  };
  drop_filled();
  while (count > 0) {
    ssize_t n = ::preadv(fd, iov, count, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "preadv");
    }
    if (n == 0) return absl::DataLossError(absl::StrCat("file ends at byte ", offset));
    offset += static_cast<uint64_t>(n);
    for (size_t left = static_cast<size_t>(n); left > 0; drop_filled()) {
      const size_t take = std::min(left, iov->iov_len);
      iov->iov_base = static_cast<char*>(iov->iov_base) + take;
      iov->iov_len -= take;
      left -= take;
    }
    drop_filled();
  }
  return absl::OkStatus();
}

absl::Status Lost(absl::FunctionRef<std::string()> what, absl::string_view why) {
  return absl::DataLossError(absl::StrCat(what(), ": ", why));
}

// A raw chunk: preadv puts the covered bytes before and after the data in
// per-thread buffers and the data straight into `out`, piece by piece, each
// hashed (XXH3 streaming, in file order) right after it lands.
absl::Status ReadRaw(int fd, const StoredChunkSpan& s, char* out,
                     absl::FunctionRef<std::string()> what) {
  thread_local Scratch prefix_buf, suffix_buf;
  const size_t suffix_length = s.length - s.data_offset - s.data_length;
  char* prefix = prefix_buf.Get(s.data_offset);
  char* suffix = suffix_buf.Get(suffix_length);
  XXH3_state_t* state = ThreadXxh3State();
  if (state == nullptr) return absl::ResourceExhaustedError("XXH3_createState failed");
  XXH3_64bits_reset(state);
  uint64_t offset = s.offset;
  size_t done = 0;
  do {  // the prefix goes with the first piece, the suffix with the last
    const size_t n = std::min<size_t>(kRawPieceBytes, s.data_length - done);
    struct iovec iov[3];
    int count = 0;
    if (done == 0) iov[count++] = {prefix, s.data_offset};
    iov[count++] = {out + done, n};
    if (done + n == s.data_length) iov[count++] = {suffix, suffix_length};
    struct iovec pieces[3];
    std::copy(iov, iov + count, pieces);  // PreadvAll consumes its iovecs
    if (absl::Status st = PreadvAll(fd, iov, count, offset); !st.ok()) {
      return Lost(what, st.message());
    }
    for (int i = 0; i < count; ++i) {
      if (pieces[i].iov_len > 0) XXH3_64bits_update(state, pieces[i].iov_base, pieces[i].iov_len);
      offset += pieces[i].iov_len;
    }
    done += n;
  } while (done < s.data_length);
  if (XXH3_64bits_digest(state) != s.xxh3) {
    return Lost(what, "checksum mismatch (stored bytes are corrupt)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadVerifiedChunk(int fd, const StoredChunkSpan& s, uint32_t raw_size, char* out,
                               absl::FunctionRef<std::string()> what) {
  if (s.data_offset > s.length || s.data_length > s.length - s.data_offset) {
    return Lost(what, "chunk bytes lie outside their checksummed span");
  }
  const bool raw = s.codec == store::kCodecRaw || s.codec == 0;
  if (raw) {
    if (s.data_length != raw_size) {
      return Lost(what, absl::StrCat("raw chunk stores ", s.data_length, " bytes, expected ",
                                     raw_size));
    }
    return ReadRaw(fd, s, out, what);
  }
  if (s.codec != store::kCodecZstd) return Lost(what, absl::StrCat("unknown codec ", s.codec));
  thread_local Scratch buf;
  char* bytes = buf.Get(s.length);
  struct iovec iov = {bytes, s.length};
  if (absl::Status st = PreadvAll(fd, &iov, 1, s.offset); !st.ok()) {
    return Lost(what, st.message());
  }
  if (XXH3_64bits(bytes, s.length) != s.xxh3) {
    return Lost(what, "checksum mismatch (stored bytes are corrupt)");
  }
  return store::DecodeChunk(store::kCodecZstd,
                            absl::string_view(bytes + s.data_offset, s.data_length), raw_size,
                            out, what());
}

}  // namespace kerncap::format
