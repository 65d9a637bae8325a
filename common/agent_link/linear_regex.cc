#include "common/agent_link/linear_regex.h"

#include <cstring>
#include <new>
#include <utility>

namespace kerncap::link {

using ByteSet = std::bitset<256>;

namespace {

ByteSet Range(int lo, int hi) {
  ByteSet s;
  for (int c = lo; c <= hi; ++c) s.set(static_cast<size_t>(c));
  return s;
}

ByteSet Digits() { return Range('0', '9'); }
ByteSet Word() { return Range('0', '9') | Range('A', 'Z') | Range('a', 'z') | Range('_', '_'); }
ByteSet Space() {
  ByteSet s;
  for (char c : {' ', '\t', '\n', '\r', '\f', '\v'}) s.set(static_cast<unsigned char>(c));
  return s;
}

// [:name:] classes (ASCII, as RE2 defines them).
bool PosixClass(std::string_view name, ByteSet* out) {
  if (name == "alnum") {
    *out = Range('0', '9') | Range('A', 'Z') | Range('a', 'z');
  } else if (name == "alpha") {
    *out = Range('A', 'Z') | Range('a', 'z');
  } else if (name == "ascii") {
    *out = Range(0, 0x7f);
  } else if (name == "blank") {
    *out = Range(' ', ' ') | Range('\t', '\t');
  } else if (name == "cntrl") {
    *out = Range(0, 0x1f) | Range(0x7f, 0x7f);
  } else if (name == "digit") {
    *out = Digits();
  } else if (name == "graph") {
    *out = Range('!', '~');
  } else if (name == "lower") {
    *out = Range('a', 'z');
  } else if (name == "print") {
    *out = Range(' ', '~');
  } else if (name == "punct") {
    *out = Range('!', '/') | Range(':', '@') | Range('[', '`') | Range('{', '~');
  } else if (name == "space") {
    *out = Space();
  } else if (name == "upper") {
    *out = Range('A', 'Z');
  } else if (name == "word") {
    *out = Word();
  } else if (name == "xdigit") {
    *out = Range('0', '9') | Range('A', 'F') | Range('a', 'f');
  } else {
    return false;
  }
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool IsPunct(unsigned char c) { return c < 0x80 && std::strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", c) && c != 0; }

}  // namespace

// Parses a pattern into a small syntax tree, then emits the program.
class RegexCompiler {
 public:
  explicit RegexCompiler(std::string_view pattern) : p_(pattern) {}

  std::optional<LinearRegex> Run(std::string* error) {
    int root = ParseAlternation(0);
    if (root >= 0 && pos_ != p_.size()) Fail("unexpected )");
    if (!error_.empty()) {
      *error = error_;
      return std::nullopt;
    }
    // Emit: the tree, then Match.
    if (!Emit(root) || !Push({LinearRegex::Op::kMatch})) {
      *error = "pattern too complex: its program exceeds " +
               std::to_string(LinearRegex::kMaxInstructions) +
               " instructions (large repetition counts expand)";
      return std::nullopt;
    }
    return std::move(re_);
  }

 private:
  using Op = LinearRegex::Op;
  struct Node {
    enum Kind { kEmpty, kByte, kClass, kConcat, kAlt, kRepeat, kBol, kEol } kind = kEmpty;
    uint32_t value = 0;  // kByte: the byte; kClass: class index
    int min = 0, max = 0;  // kRepeat; max -1: unbounded
    std::vector<int> kids;
  };

  void Fail(std::string what) {
    if (error_.empty()) error_ = std::move(what);
  }
  bool AtEnd() const { return pos_ >= p_.size(); }
  char Peek() const { return p_[pos_]; }
  int Add(Node n) {
    nodes_.push_back(std::move(n));
    return static_cast<int>(nodes_.size() - 1);
  }
  int AddClass(const ByteSet& s) {
    Node n;
    n.kind = Node::kClass;
    n.value = static_cast<uint32_t>(re_.classes_.size());
    re_.classes_.push_back(s);
    return Add(std::move(n));
  }
  int AddByte(unsigned char c) {
    Node n;
    n.kind = Node::kByte;
    n.value = c;
    return Add(std::move(n));
  }

  int ParseAlternation(int depth) {
    if (depth > LinearRegex::kMaxNesting) {
      Fail("groups nested deeper than " + std::to_string(LinearRegex::kMaxNesting));
      return -1;
    }
    Node alt;
    alt.kind = Node::kAlt;
    alt.kids.push_back(ParseConcatenation(depth));
    while (error_.empty() && !AtEnd() && Peek() == '|') {
      ++pos_;
      alt.kids.push_back(ParseConcatenation(depth));
    }
    if (!error_.empty()) return -1;
    if (alt.kids.size() == 1) return alt.kids[0];
    return Add(std::move(alt));
  }

  int ParseConcatenation(int depth) {
    Node cat;
    cat.kind = Node::kConcat;
    while (error_.empty() && !AtEnd() && Peek() != '|' && Peek() != ')') {
      int atom = ParseAtom(depth);
      if (atom < 0) return -1;
      atom = ParseRepetitions(atom);
      if (atom < 0) return -1;
      cat.kids.push_back(atom);
    }
    if (!error_.empty()) return -1;
    if (cat.kids.size() == 1) return cat.kids[0];
    if (cat.kids.empty()) return Add(Node{});
    return Add(std::move(cat));
  }

  // {n}, {n,}, {n,m} at pos_ (which is at '{'): true and the bounds when it
  // is one (pos_ after it); false, pos_ unchanged, when '{' is a literal.
  bool MaybeRepeat(int* min, int* max) {
    size_t i = pos_ + 1;
    auto number = [&](int* out) {
      size_t start = i;
      long v = 0;
      while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9' && i - start < 8) {
        v = v * 10 + (p_[i] - '0');
        ++i;
      }
      if (i == start) return false;
      *out = static_cast<int>(v);
      return true;
    };
    if (!number(min)) return false;
    if (i < p_.size() && p_[i] == '}') {
      *max = *min;
    } else if (i < p_.size() && p_[i] == ',') {
      ++i;
      if (i < p_.size() && p_[i] == '}') {
        *max = -1;
      } else if (!number(max) || i >= p_.size() || p_[i] != '}') {
        return false;
      }
    } else {
      return false;
    }
    pos_ = i + 1;
    return true;
  }

  int ParseRepetitions(int atom) {
    bool repeated = false;
    while (!AtEnd()) {
      int min = 0, max = 0;
      const char c = Peek();
      const size_t at = pos_;
      if (c == '*') {
        min = 0, max = -1, ++pos_;
      } else if (c == '+') {
        min = 1, max = -1, ++pos_;
      } else if (c == '?') {
        min = 0, max = 1, ++pos_;
      } else if (c == '{' && MaybeRepeat(&min, &max)) {
        if (min > LinearRegex::kMaxRepeat || max > LinearRegex::kMaxRepeat ||
            (max >= 0 && max < min)) {
          Fail("bad repetition operator: " + std::string(p_.substr(at, pos_ - at)));
          return -1;
        }
      } else {
        break;
      }
      if (repeated) {
        Fail("bad repetition operator: " + std::string(p_.substr(at - 1, pos_ - at + 1)));
        return -1;
      }
      if (!AtEnd() && Peek() == '?') ++pos_;  // lazy: the same yes/no answer
      Node r;
      r.kind = Node::kRepeat;
      r.min = min;
      r.max = max;
      r.kids.push_back(atom);
      atom = Add(std::move(r));
      repeated = true;
    }
    return atom;
  }

  int ParseAtom(int depth) {
    const char c = Peek();
    switch (c) {
      case '(': {
        ++pos_;
        if (!AtEnd() && Peek() == '?') {
          if (pos_ + 1 < p_.size() && p_[pos_ + 1] == ':') {
            pos_ += 2;
          } else {
            Fail("unsupported group syntax (? (no lookaround, flags or named groups)");
            return -1;
          }
        }
        int inner = ParseAlternation(depth + 1);
        if (inner < 0) return -1;
        if (AtEnd() || Peek() != ')') {
          Fail("missing ): " + std::string(p_));
          return -1;
        }
        ++pos_;
        return inner;
      }
      case '[':
        return ParseClass();
      case '.':
        ++pos_;
        return AddClass(ByteSet().set());
      case '^': {
        ++pos_;
        Node n;
        n.kind = Node::kBol;
        return Add(std::move(n));
      }
      case '$': {
        ++pos_;
        Node n;
        n.kind = Node::kEol;
        return Add(std::move(n));
      }
      case '*':
      case '+':
      case '?':
        Fail(std::string("missing argument to repetition operator: ") + c);
        return -1;
      case '{': {
        int min, max;
        const size_t at = pos_;
        if (MaybeRepeat(&min, &max)) {
          Fail("missing argument to repetition operator: " + std::string(p_.substr(at, pos_ - at)));
          return -1;
        }
        ++pos_;
        return AddByte('{');
      }
      case '\\':
        return ParseEscape();
      default:
        ++pos_;
        return AddByte(static_cast<unsigned char>(c));
    }
  }

  // An escape at pos_ ('\'): as a class (kept in *set) or a single byte
  // (*byte, *set empty). Shared by atoms and classes; anchors are handled
  // by the caller. False on error.
  bool Escape(bool in_class, ByteSet* set, int* byte) {
    ++pos_;  // the backslash
    if (AtEnd()) {
      Fail("trailing \\");
      return false;
    }
    const char c = p_[pos_++];
    set->reset();
    *byte = -1;
    switch (c) {
      case 'd': *set = Digits(); return true;
      case 'D': *set = ~Digits(); return true;
      case 'w': *set = Word(); return true;
      case 'W': *set = ~Word(); return true;
      case 's': *set = Space(); return true;
      case 'S': *set = ~Space(); return true;
      case 't': *byte = '\t'; return true;
      case 'n': *byte = '\n'; return true;
      case 'r': *byte = '\r'; return true;
      case 'f': *byte = '\f'; return true;
      case 'v': *byte = '\v'; return true;
      case 'a': *byte = '\a'; return true;
      case 'x': {
        if (pos_ + 2 <= p_.size() && HexValue(p_[pos_]) >= 0 && HexValue(p_[pos_ + 1]) >= 0) {
          *byte = HexValue(p_[pos_]) * 16 + HexValue(p_[pos_ + 1]);
          pos_ += 2;
          return true;
        }
        Fail("bad escape: \\x needs two hex digits");
        return false;
      }
      default:
        if (IsPunct(static_cast<unsigned char>(c))) {
          *byte = static_cast<unsigned char>(c);
          return true;
        }
        if (!in_class && (c == 'A' || c == 'z')) {
          *byte = -2;  // anchors: the caller's business
          --pos_;
          return true;
        }
        Fail(std::string("unsupported escape \\") + c +
             " (no backreferences, word boundaries or Unicode classes)");
        return false;
    }
  }

  int ParseEscape() {
    if (pos_ + 1 < p_.size() && (p_[pos_ + 1] == 'A' || p_[pos_ + 1] == 'z')) {
      Node n;
      n.kind = p_[pos_ + 1] == 'A' ? Node::kBol : Node::kEol;
      pos_ += 2;
      return Add(std::move(n));
    }
    ByteSet set;
    int byte;
    if (!Escape(false, &set, &byte)) return -1;
    if (byte >= 0) return AddByte(static_cast<unsigned char>(byte));
    return AddClass(set);
  }

  int ParseClass() {
    const size_t start = pos_;
    ++pos_;  // '['
    bool negate = false;
    if (!AtEnd() && Peek() == '^') {
      negate = true;
      ++pos_;
    }
    ByteSet set;
    bool first = true;
    while (true) {
      if (AtEnd()) {
        Fail("missing ]: " + std::string(p_.substr(start)));
        return -1;
      }
      char c = Peek();
      if (c == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      if (c == '[' && pos_ + 1 < p_.size() && p_[pos_ + 1] == ':') {
        const size_t end = p_.find(":]", pos_ + 2);
        if (end != std::string_view::npos) {
          std::string_view name = p_.substr(pos_ + 2, end - pos_ - 2);
          bool neg = !name.empty() && name[0] == '^';
          if (neg) name.remove_prefix(1);
          ByteSet cls;
          if (!PosixClass(name, &cls)) {
            Fail("invalid character class range: [:" + std::string(name) + ":]");
            return -1;
          }
          set |= neg ? ~cls : cls;
          pos_ = end + 2;
          continue;
        }
      }
      // One item: a byte (possibly the start of a range) or an escape class.
      int lo;
      if (c == '\\') {
        ByteSet esc;
        if (!Escape(true, &esc, &lo)) return -1;
        if (lo < 0) {
          set |= esc;
          continue;
        }
      } else {
        lo = static_cast<unsigned char>(c);
        ++pos_;
      }
      if (pos_ + 1 < p_.size() && Peek() == '-' && p_[pos_ + 1] != ']') {
        ++pos_;  // '-'
        int hi;
        if (Peek() == '\\') {
          ByteSet esc;
          if (!Escape(true, &esc, &hi)) return -1;
          if (hi < 0) {
            Fail("bad character class range");
            return -1;
          }
        } else {
          hi = static_cast<unsigned char>(Peek());
          ++pos_;
        }
        if (hi < lo) {
          Fail("bad character class range: " + std::string(p_.substr(start, pos_ - start)));
          return -1;
        }
        set |= Range(lo, hi);
      } else {
        set.set(static_cast<size_t>(lo));
      }
    }
    return AddClass(negate ? ~set : set);
  }

  bool Push(LinearRegex::Inst inst) {
    if (re_.prog_.size() >= LinearRegex::kMaxInstructions) return false;
    re_.prog_.push_back(inst);
    return true;
  }
  uint32_t Here() const { return static_cast<uint32_t>(re_.prog_.size()); }

  bool Emit(int id) {
    // Copy: nodes_ does not change while emitting, but keep it simple.
    const Node& n = nodes_[static_cast<size_t>(id)];
    switch (n.kind) {
      case Node::kEmpty:
        return true;
      case Node::kByte:
        return Push({Op::kByte, n.value, 1});
      case Node::kClass:
        return Push({Op::kByte, n.value, 0});
      case Node::kBol:
        return Push({Op::kBol});
      case Node::kEol:
        return Push({Op::kEol});
      case Node::kConcat:
        for (int k : n.kids) {
          if (!Emit(k)) return false;
        }
        return true;
      case Node::kAlt: {
        std::vector<uint32_t> jumps;
        for (size_t i = 0; i < n.kids.size(); ++i) {
          uint32_t split = Here();
          const bool last = i + 1 == n.kids.size();
          if (!last && !Push({Op::kSplit, split + 1, 0})) return false;
          if (!Emit(n.kids[i])) return false;
          if (!last) {
            jumps.push_back(Here());
            if (!Push({Op::kJmp, 0})) return false;
            re_.prog_[split].y = Here();
          }
        }
        for (uint32_t j : jumps) re_.prog_[j].x = Here();
        return true;
      }
      case Node::kRepeat: {
        for (int i = 0; i < n.min; ++i) {
          if (!Emit(n.kids[0])) return false;
        }
        if (n.max < 0) {
          const uint32_t loop = Here();
          if (!Push({Op::kSplit, loop + 1, 0})) return false;
          if (!Emit(n.kids[0])) return false;
          if (!Push({Op::kJmp, loop})) return false;
          re_.prog_[loop].y = Here();
          return true;
        }
        std::vector<uint32_t> splits;
        for (int i = n.min; i < n.max; ++i) {
          splits.push_back(Here());
          if (!Push({Op::kSplit, Here() + 1, 0})) return false;
          if (!Emit(n.kids[0])) return false;
        }
        for (uint32_t s : splits) re_.prog_[s].y = Here();
        return true;
      }
    }
    return false;
  }

  std::string_view p_;
  size_t pos_ = 0;
  std::string error_;
  std::vector<Node> nodes_;
  LinearRegex re_;
};

std::optional<LinearRegex> LinearRegex::Compile(std::string_view pattern, std::string* error) {
  try {
    return RegexCompiler(pattern).Run(error);
  } catch (const std::exception& e) {
    *error = std::string("cannot compile: ") + e.what();
    return std::nullopt;
  }
}

namespace {

// A set of program counters with O(1) insert, lookup and clear.
class PcSet {
 public:
  explicit PcSet(size_t n) : dense_(n), sparse_(n) {}
  bool Contains(uint32_t pc) const {
    const uint32_t i = sparse_[pc];
    return i < size_ && dense_[i] == pc;
  }
  void Insert(uint32_t pc) {
    sparse_[pc] = size_;
    dense_[size_++] = pc;
  }
  void Clear() { size_ = 0; }
  size_t size() const { return size_; }
  uint32_t operator[](size_t i) const { return dense_[i]; }

 private:
  std::vector<uint32_t> dense_, sparse_;
  uint32_t size_ = 0;
};

}  // namespace

bool LinearRegex::Search(std::string_view text) const {
  try {
    const size_t m = prog_.size();
    const size_t n = text.size();
    PcSet current(m), next(m);
    std::vector<uint32_t> stack;
    stack.reserve(2 * m + 2);
    bool matched = false;
    // Follows the empty-width edges from `pc` at text position `pos`,
    // adding every instruction reached (once) to `list`.
    auto add = [&](PcSet& list, uint32_t start, size_t pos) {
      if (list.Contains(start)) return;
      if (prog_[start].op == Op::kByte) {  // the common case: no empty edges
        list.Insert(start);
        return;
      }
      stack.clear();
      stack.push_back(start);
      while (!stack.empty()) {
        const uint32_t pc = stack.back();
        stack.pop_back();
        if (list.Contains(pc)) continue;
        list.Insert(pc);
        const Inst& in = prog_[pc];
        switch (in.op) {
          case Op::kJmp: stack.push_back(in.x); break;
          case Op::kSplit:
            stack.push_back(in.y);
            stack.push_back(in.x);
            break;
          case Op::kBol:
            if (pos == 0) stack.push_back(pc + 1);
            break;
          case Op::kEol:
            if (pos == n) stack.push_back(pc + 1);
            break;
          case Op::kMatch: matched = true; break;
          case Op::kByte: break;
        }
      }
    };
    for (size_t pos = 0;; ++pos) {
      add(current, 0, pos);  // unanchored: a new thread at every position
      if (matched) return true;
      if (pos == n) return false;
      const unsigned char c = static_cast<unsigned char>(text[pos]);
      next.Clear();
      for (size_t i = 0; i < current.size(); ++i) {
        const uint32_t pc = current[i];
        const Inst& in = prog_[pc];
        if (in.op != Op::kByte) continue;
        const bool hit = in.y == 1 ? in.x == c : classes_[in.x].test(c);
        if (hit) add(next, pc + 1, pos + 1);
      }
      if (matched) return true;
      std::swap(current, next);
    }
  } catch (const std::bad_alloc&) {
    return false;
  }
}

}  // namespace kerncap::link
