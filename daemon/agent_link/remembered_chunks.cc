#include "daemon/agent_link/remembered_chunks.h"

namespace kerncap::link {

bool RememberedChunks::Remember(const ChunkFingerprint& fp, const Entry& entry) {
  auto it = entries_.find(fp);
  if (it != entries_.end()) {
    it->second = entry;
    return true;
  }
  if (entries_.size() >= max_entries_) return false;
  entries_.emplace(fp, entry);
  return true;
}

const RememberedChunks::Entry* RememberedChunks::Find(const ChunkFingerprint& fp) const {
  auto it = entries_.find(fp);
  return it == entries_.end() ? nullptr : &it->second;
}

}  // namespace kerncap::link
