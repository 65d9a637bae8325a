// tokenizer.cu: host-side preprocessing before inference: a synthetic corpus,
// a byte-pair-merge vocabulary learned from it, and the tokenized prompt.
#include <algorithm>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "kcsim/model.h"

namespace kcsim {
namespace {

std::string SyntheticCorpus(size_t bytes, uint64_t seed) {
  static const char* kWords[] = {"kernel", "tensor", "memory", "launch", "stream", "device",
                                 "capture", "replay", "warp", "block", "grid", "shared",
                                 "register", "latency", "bandwidth", "cache", "token", "layer"};
  std::mt19937_64 rng(seed);
  std::string s;
  s.reserve(bytes + 16);
  while (s.size() < bytes) {
    s += kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
    s += rng() % 7 == 0 ? ". " : " ";
  }
  return s;
}

}  // namespace

std::vector<int32_t> PreparePrompt(const ModelConfig& c) {
  std::string corpus = SyntheticCorpus(24u << 20, c.seed);
  // Byte-pair merges: the most frequent adjacent pair becomes a new symbol,
  // repeated until the vocabulary is full or merges stop paying.
  std::vector<int32_t> seq(corpus.begin(), corpus.end());
  int32_t next = 256;
  const int merges = 48;
  for (int m = 0; m < merges && next < c.vocab; ++m) {
    std::unordered_map<uint64_t, uint32_t> counts;
    counts.reserve(1 << 16);
    for (size_t i = 0; i + 1 < seq.size(); ++i) {
      ++counts[(static_cast<uint64_t>(seq[i]) << 32) | static_cast<uint32_t>(seq[i + 1])];
    }
    auto best = std::max_element(counts.begin(), counts.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    if (best == counts.end() || best->second < 2) break;
    const int32_t a = static_cast<int32_t>(best->first >> 32);
    const int32_t b = static_cast<int32_t>(best->first & 0xffffffffu);
    size_t w = 0;
    for (size_t r = 0; r < seq.size(); ++r) {
      if (r + 1 < seq.size() && seq[r] == a && seq[r + 1] == b) {
        seq[w++] = next;
        ++r;
      } else {
        seq[w++] = seq[r];
      }
    }
    seq.resize(w);
    ++next;
  }
  std::vector<int32_t> prompt(seq.begin(), seq.begin() + c.tokens);
  for (int32_t& t : prompt) t %= c.vocab;
  return prompt;
}

}  // namespace kcsim
