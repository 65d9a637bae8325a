// kerncap-cuda-slice: writes the minimal CUDA unit of one kernel (see
// reproducer/generator/minimal_unit.h, which runs it and verifies the result).
//
//   kerncap-cuda-slice --symbol=MANGLED --root=DIR --out=FILE [--report=FILE]
//       [--cuda-path=DIR] [--cuda-arch-macro=900] [--resource-dir=DIR]
//       -- <-D/-U/-I/-isystem/-include/-std arguments> UNIT
//
// clang's resource headers (its CUDA wrappers, stddef.h, intrinsics) are read
// from --resource-dir=DIR/include, else from <this binary's folder>/../lib/
// kerncap-clang/include (the build tree links it to clang 15's own folder; the
// GPU bundle and `cmake --install` copy it there), so the binary works
// wherever that layout is unpacked.
//
// Clang parses the unit in CUDA device mode; the kernel is the __global__
// function (or template specialization) whose Itanium name is --symbol. From
// it, every declaration it transitively refers to is collected: functions,
// templates and the specializations the kernel reaches (their instantiated
// bodies are walked too, so dependent calls resolve), classes, enums,
// typedefs, variables (static __device__, __constant__), out-of-line member
// definitions, forward declarations. Declarations in files under --root
// (the application's code) are copied as their original text, in
// translation-unit order, inside the namespaces and extern "C" blocks that
// held them; the #defines that text (or a toolkit header) uses are copied
// before it. A declaration in a file outside --root (toolkit, system) is not
// copied: the project's #include line that brought that file in is. A
// template kernel ends with an explicit instantiation of the captured
// specialization, so the unit emits that one under the same mangled name.
//
// Output: FILE (the unit) and, with --report, a JSON object:
//   {"kernel": "<qualified name>", "template": bool, "declarations": N,
//    "macros": N, "includes": ["<cstdint>", ...], "parse_errors": N,
//    "first_error": "..."}
// KERNCAP_SLICE_DEBUG=1 lists the name clang gives every kernel it sees.
// Exit status: 0 written; 1 the kernel is not in the unit or a declaration's
// text could not be taken (the reason on stderr's last line, after
// "kerncap-cuda-slice: "); 2 bad usage; 3 clang's resource headers are not
// where they must be (the installation is incomplete; the path is named).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "clang/AST/ASTConsumer.h"
#include "clang/AST/ASTContext.h"
#include "clang/AST/Attr.h"
#include "clang/AST/DeclTemplate.h"
#include "clang/AST/Mangle.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/Basic/Diagnostic.h"
#include "clang/Basic/FileManager.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/FrontendAction.h"
#include "clang/Lex/Lexer.h"
#include "clang/Lex/MacroInfo.h"
#include "clang/Lex/PPCallbacks.h"
#include "clang/Lex/Preprocessor.h"
#include "clang/Tooling/Tooling.h"
#include "llvm/Demangle/Demangle.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace {

using namespace clang;  // NOLINT: a single-purpose tool over clang's AST

struct Options {
  std::string symbol;
  std::string root;  // real path, no trailing '/'
  std::string out;
  std::string report;
  std::string cuda_path;     // the toolkit (nvcc's folder's parent)
  std::string arch_macro;    // "900": __CUDA_ARCH__ as the captured GPU has it
  std::string resource_dir;  // clang's: holds include/ (see ResourceDir)
  std::vector<std::string> clang_args;
};

std::string Fail;  // the reason the slice could not be made (first one wins)
void SetFail(const std::string& why) {
  if (Fail.empty()) Fail = why;
}

// Which files are the application's (copied as text) and which the toolkit's
// or the system's (kept as #include lines).
class FileKinds {
 public:
  FileKinds(const SourceManager& sm, std::string root) : sm_(sm), root_(std::move(root)) {}
  bool IsProject(FileID fid) {
    auto it = cache_.find(fid);
    if (it != cache_.end()) return it->second;
    bool project = false;
    if (const FileEntry* fe = sm_.getFileEntryForID(fid)) {
      llvm::SmallString<256> real;
      if (llvm::sys::fs::real_path(fe->getName(), real)) real = fe->getName();
      project = IsProjectPath(std::string(real.str()));
    }
    cache_[fid] = project;
    return project;
  }
  bool IsProjectPath(const std::string& p) const {
    return p.size() > root_.size() && p.compare(0, root_.size(), root_) == 0 &&
           p[root_.size()] == '/';
  }
  bool IsProject(SourceLocation loc) {
    if (loc.isInvalid()) return false;
    return IsProject(sm_.getFileID(sm_.getExpansionLoc(loc)));
  }

 private:
  const SourceManager& sm_;
  std::string root_;
  std::map<FileID, bool> cache_;
};

struct IncludeRecord {
  SourceLocation hash;  // the '#'
  std::string spelled;  // <cstdint> / "x.h"
  const FileEntry* file = nullptr;
};

struct MacroRecord {
  SourceLocation begin;  // the '#' of the #define
  SourceLocation end;    // end of its last token
  std::string name;
};

// Records #includes and #defines of project files and every use of a project
// macro (expansion, defined(), #ifdef / #ifndef).
class PPRecorder : public PPCallbacks {
 public:
  PPRecorder(SourceManager& sm, FileKinds& kinds, const LangOptions& lo)
      : sm_(sm), kinds_(kinds), lo_(lo) {}

  // Every #include processed (also of guarded files) is an edge of the
  // include graph; those written in project files are the candidates for
  // the unit's #include lines.
  void InclusionDirective(SourceLocation hash, const Token&, StringRef file, bool angled,
                          CharSourceRange, Optional<FileEntryRef> included, StringRef, StringRef,
                          const clang::Module*, SrcMgr::CharacteristicKind) override {
    if (!included) return;
    FileID fid = sm_.getFileID(hash);
    const FileEntry* from = sm_.getFileEntryForID(fid);
    const FileEntry* to = &included->getFileEntry();
    edges_[from].push_back(to);
    if (kinds_.IsProject(fid) && !IsProjectFile(to)) {
      by_line_[{fid, sm_.getSpellingLineNumber(hash)}] = project_includes_.size();
      project_includes_.push_back(
          {hash, angled ? "<" + file.str() + ">" : "\"" + file.str() + "\"", to});
    }
  }
  // The project #include (index in project_includes()) at a file location.
  std::optional<size_t> ProjectIncludeAt(SourceLocation loc) const {
    auto it = by_line_.find({sm_.getFileID(loc), sm_.getSpellingLineNumber(loc)});
    if (it == by_line_.end()) return std::nullopt;
    return it->second;
  }
  bool IsProjectFile(const FileEntry* fe) {
    llvm::SmallString<256> real;
    if (llvm::sys::fs::real_path(fe->getName(), real)) real = fe->getName();
    return kinds_.IsProjectPath(std::string(real.str()));
  }
  void MacroDefined(const Token& name, const MacroDirective* md) override {
    const MacroInfo* mi = md->getMacroInfo();
    SourceLocation loc = mi->getDefinitionLoc();
    if (loc.isInvalid() || !loc.isFileID() || !kinds_.IsProject(loc)) return;
    // The directive starts at its line's '#'.
    FileID fid = sm_.getFileID(loc);
    unsigned off = sm_.getFileOffset(loc);
    StringRef buf = sm_.getBufferData(fid);
    size_t line_start = buf.rfind('\n', off);
    line_start = line_start == StringRef::npos ? 0 : line_start + 1;
    SourceLocation end = Lexer::getLocForEndOfToken(mi->getDefinitionEndLoc(), 0, sm_, lo_);
    if (mi->getNumTokens() == 0 && !mi->isFunctionLike()) {
      end = Lexer::getLocForEndOfToken(loc, 0, sm_, lo_);
    }
    macros_[mi] = {sm_.getLocForStartOfFile(fid).getLocWithOffset(line_start), end,
                   name.getIdentifierInfo()->getName().str()};
  }
  void MacroExpands(const Token&, const MacroDefinition& md, SourceRange range,
                    const MacroArgs*) override {
    Use(md, range.getBegin());
  }
  void Defined(const Token&, const MacroDefinition& md, SourceRange range) override {
    Use(md, range.getBegin());
  }
  void Ifdef(SourceLocation loc, const Token&, const MacroDefinition& md) override { Use(md, loc); }
  void Ifndef(SourceLocation loc, const Token&, const MacroDefinition& md) override { Use(md, loc); }

  const std::vector<IncludeRecord>& project_includes() const { return project_includes_; }
  const std::map<const FileEntry*, std::vector<const FileEntry*>>& edges() const { return edges_; }
  const std::map<const MacroInfo*, SourceLocation>& system_macro_files() const {
    return system_macro_files_;
  }
  const std::map<const MacroInfo*, MacroRecord>& macros() const { return macros_; }
  const std::vector<std::pair<const MacroInfo*, SourceLocation>>& uses() const { return uses_; }

 private:
  void Use(const MacroDefinition& md, SourceLocation at) {
    const MacroInfo* mi = md.getMacroInfo();
    if (mi == nullptr || at.isInvalid()) return;
    uses_.emplace_back(mi, sm_.getExpansionLoc(at));
    SourceLocation def = mi->getDefinitionLoc();
    if (def.isValid() && def.isFileID() && !kinds_.IsProject(def)) system_macro_files_[mi] = def;
  }
  SourceManager& sm_;
  FileKinds& kinds_;
  const LangOptions& lo_;
  std::vector<IncludeRecord> project_includes_;
  std::map<std::pair<FileID, unsigned>, size_t> by_line_;
  std::map<const FileEntry*, std::vector<const FileEntry*>> edges_;
  std::map<const MacroInfo*, SourceLocation> system_macro_files_;  // where defined
  std::map<const MacroInfo*, MacroRecord> macros_;
  std::vector<std::pair<const MacroInfo*, SourceLocation>> uses_;
};

// Every declaration a piece of code names (templates: as written; walk an
// instantiation separately to see what its dependent names resolved to).
class RefCollector : public RecursiveASTVisitor<RefCollector> {
 public:
  explicit RefCollector(std::vector<const Decl*>* out) : out_(out) {}
  bool shouldVisitTemplateInstantiations() const { return false; }
  bool shouldVisitImplicitCode() const { return true; }

  bool VisitDeclRefExpr(DeclRefExpr* e) {
    Add(e->getDecl());
    Add(e->getFoundDecl());
    return true;
  }
  bool VisitMemberExpr(MemberExpr* e) {
    Add(e->getMemberDecl());
    Add(e->getFoundDecl().getDecl());
    return true;
  }
  bool VisitCXXConstructExpr(CXXConstructExpr* e) {
    Add(e->getConstructor());
    return true;
  }
  bool VisitOverloadExpr(OverloadExpr* e) {
    for (const NamedDecl* d : e->decls()) Add(d);
    return true;
  }
  bool VisitCXXNewExpr(CXXNewExpr* e) {
    Add(e->getOperatorNew());
    return true;
  }
  bool VisitCXXDeleteExpr(CXXDeleteExpr* e) {
    Add(e->getOperatorDelete());
    return true;
  }
  bool VisitType(Type* t) {
    if (const auto* tt = t->getAs<TagType>()) Add(tt->getDecl());
    if (const auto* td = dyn_cast<TypedefType>(t)) Add(td->getDecl());
    if (const auto* ut = dyn_cast<UsingType>(t)) Add(ut->getFoundDecl());
    if (const auto* ts = dyn_cast<TemplateSpecializationType>(t)) {
      Add(ts->getTemplateName().getAsTemplateDecl());
    }
    if (const auto* ic = dyn_cast<InjectedClassNameType>(t)) Add(ic->getDecl());
    if (const auto* dt = dyn_cast<DeducedTemplateSpecializationType>(t)) {
      Add(dt->getTemplateName().getAsTemplateDecl());
    }
    return true;
  }
  bool TraverseTemplateName(TemplateName name) {
    Add(name.getAsTemplateDecl());
    return RecursiveASTVisitor::TraverseTemplateName(name);
  }
  bool TraverseNestedNameSpecifierLoc(NestedNameSpecifierLoc nns) {
    for (NestedNameSpecifierLoc n = nns; n; n = n.getPrefix()) {
      if (const NestedNameSpecifier* s = n.getNestedNameSpecifier()) {
        Add(s->getAsNamespaceAlias());
      }
    }
    return RecursiveASTVisitor::TraverseNestedNameSpecifierLoc(nns);
  }
  bool VisitUsingDirectiveDecl(UsingDirectiveDecl* d) {
    Add(d->getNominatedNamespaceAsWritten());
    return true;
  }

 private:
  void Add(const Decl* d) {
    if (d != nullptr) out_->push_back(d);
  }
  std::vector<const Decl*>* out_;
};

// One piece of the output, at its place in the translation unit.
struct Item {
  SourceLocation key;  // where it was in the unit (file location)
  enum Kind { kInclude, kMacro, kDecl } kind;
  std::string text;
  FileID file;
  unsigned begin = 0, end = 0;  // offsets in `file` (macros, decls)
  std::vector<std::string> open, close;  // namespace / extern "C" wrappers (decls)
  std::string origin;  // "file:line"
};

class Slicer {
 public:
  Slicer(ASTContext& ctx, PPRecorder& pp, FileKinds& kinds, const Options& opt)
      : ctx_(ctx), sm_(ctx.getSourceManager()), pp_(pp), kinds_(kinds), opt_(opt) {}

  bool Run() {
    const FunctionDecl* kernel = FindKernel();
    if (kernel == nullptr) {
      SetFail("no __global__ function of the unit has the mangled name " + opt_.symbol +
              " in clang's parse of it");
      return false;
    }
    kernel_ = kernel;
    Reach(kernel);
    while (!walk_.empty()) {
      const Decl* d = walk_.back();
      walk_.pop_back();
      std::vector<const Decl*> refs;
      RefCollector rc(&refs);
      rc.TraverseDecl(const_cast<Decl*>(d));
      for (const Decl* r : refs) Reach(r);
    }
    CopyUsingDirectives();
    return Fail.empty();
  }

  // Writes the unit and the report's fields.
  bool Emit(std::string* unit, std::string* report) {
    std::vector<Item> items;
    for (const auto& [h, origin] : decl_items_) {
      Item it;
      if (!DeclText(h, &it)) return false;
      items.push_back(std::move(it));
    }
    // Overlapping declarations (int a, b;) and macro-made ones: one copy.
    std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
      return a.file == b.file ? a.begin < b.begin : a.file < b.file;
    });
    std::vector<Item> merged;
    for (Item& it : items) {
      if (!merged.empty() && merged.back().file == it.file && it.begin < merged.back().end) {
        Item& m = merged.back();
        if (it.end > m.end) {
          m.end = it.end;
          m.text = sm_.getBufferData(m.file).substr(m.begin, m.end - m.begin).str();
        }
        continue;
      }
      merged.push_back(std::move(it));
    }
    // The macros used inside the copied text, or by toolkit headers.
    std::set<const MacroInfo*> used;
    for (const auto& [mi, at] : pp_.uses()) {
      if (pp_.macros().count(mi) == 0) continue;
      FileID fid = sm_.getFileID(at);
      if (!kinds_.IsProject(fid)) {
        used.insert(mi);
        continue;
      }
      unsigned off = sm_.getFileOffset(at);
      for (const Item& m : merged) {
        if (m.file == fid && off >= m.begin && off < m.end) {
          used.insert(mi);
          break;
        }
      }
    }
    // Toolkit/system macros (assert, CUDART_VERSION) in the copied text:
    // the #include that defines them.
    for (const auto& [mi, at] : pp_.uses()) {
      auto sys = pp_.system_macro_files().find(mi);
      if (sys == pp_.system_macro_files().end()) continue;
      FileID fid = sm_.getFileID(at);
      if (!kinds_.IsProject(fid)) continue;
      unsigned off = sm_.getFileOffset(at);
      for (const Item& m : merged) {
        if (m.file == fid && off >= m.begin && off < m.end) {
          NoteSystemAt(sys->second, /*macro=*/true);
          break;
        }
      }
    }
    std::map<std::string, int> name_count;
    for (const MacroInfo* mi : used) ++name_count[pp_.macros().at(mi).name];
    size_t macro_items = 0;
    for (const MacroInfo* mi : used) {
      const MacroRecord& r = pp_.macros().at(mi);
      Item it;
      it.kind = Item::kMacro;
      it.key = r.begin;
      it.file = sm_.getFileID(r.begin);
      it.begin = sm_.getFileOffset(r.begin);
      it.end = sm_.getFileOffset(r.end);
      it.text = (name_count[r.name] > 1 ? "#undef " + r.name + "\n" : std::string()) +
                sm_.getBufferData(it.file).substr(it.begin, it.end - it.begin).str();
      it.origin = Origin(r.begin);
      merged.push_back(std::move(it));
      ++macro_items;
    }
    size_t decls = 0;
    for (const Item& m : merged) decls += m.kind == Item::kDecl;
    for (const auto& [key, rec] : system_includes_) {
      Item it;
      it.kind = Item::kInclude;
      it.key = rec.hash;
      it.text = "#include " + rec.spelled;
      it.origin = Origin(rec.hash);
      merged.push_back(std::move(it));
    }
    std::stable_sort(merged.begin(), merged.end(), [this](const Item& a, const Item& b) {
      return sm_.isBeforeInTranslationUnit(a.key, b.key);
    });

    std::string& u = *unit;
    u += "// The minimal unit of kernel " + KernelName() +
         ", written by kerncap (kerncap-cuda-slice):\n"
         "// the kernel and only the declarations it needs, copied from the application's\n"
         "// sources in their original order (each one's origin in the comment above it);\n"
         "// toolkit and system headers stay #includes. Edit the kernel here: make recompile\n"
         "// compiles this file alone. kerncap.json (edit) says how it was verified.\n";
    for (const Item& it : merged) {
      u += "\n// " + it.origin + "\n";
      for (const std::string& o : it.open) u += o;
      u += it.text;
      u += "\n";
      for (auto c = it.close.rbegin(); c != it.close.rend(); ++c) u += *c;
    }
    const bool is_template = kernel_->getTemplateSpecializationKind() != TSK_Undeclared;
    const bool nameable = is_template && Nameable(kernel_->getTemplateSpecializationArgs());
    if (nameable) {
      u += "\n// The captured specialization (" + opt_.symbol + "):\n" + Instantiation() + "\n";
    } else if (is_template) {
      // A lambda or local class among the arguments cannot be named: the
      // function that holds it (copied, since the kernel names its type)
      // instantiates the kernel as the application did.
      u += "\n// The captured specialization (" + opt_.symbol +
           ") is instantiated by the call above\n// (its template arguments include a lambda or "
           "local type, which cannot be named).\n";
    }
    std::string includes;
    for (const auto& [key, rec] : system_includes_) {
      includes += std::string(includes.empty() ? "" : ", ") + Quote(rec.spelled);
    }
    *report = "{\"kernel\": " + Quote(KernelName()) +
              ", \"template\": " + (is_template ? "true" : "false") +
              ", \"declarations\": " + std::to_string(decls) +
              ", \"macros\": " + std::to_string(macro_items) + ", \"includes\": [" + includes + "]";
    return true;
  }

  const FunctionDecl* kernel() const { return kernel_; }

 private:
  static std::string Quote(const std::string& s) {
    std::string o = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') {
        o += '\\';
        o += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char b[8];
        std::snprintf(b, sizeof b, "\\u%04x", c);
        o += b;
      } else {
        o += c;
      }
    }
    return o + "\"";
  }

  std::string KernelName() const {
    std::string s;
    llvm::raw_string_ostream os(s);
    kernel_->getNameForDiagnostic(os, ctx_.getPrintingPolicy(), /*Qualified=*/true);
    return os.str();
  }

  // Whether every type among the arguments can be written at namespace
  // scope (no lambda, local or unnamed class, also nested in other
  // specializations' arguments).
  static bool Nameable(const TemplateArgumentList* args) {
    if (args == nullptr) return true;
    for (const TemplateArgument& a : args->asArray()) {
      if (!Nameable(a)) return false;
    }
    return true;
  }
  static bool Nameable(const TemplateArgument& a) {
    if (a.getKind() == TemplateArgument::Pack) {
      for (const TemplateArgument& p : a.pack_elements()) {
        if (!Nameable(p)) return false;
      }
      return true;
    }
    if (a.getKind() != TemplateArgument::Type) return true;
    QualType t = a.getAsType().getCanonicalType();
    while (!t.isNull() && (t->isPointerType() || t->isReferenceType() || t->isArrayType())) {
      t = t->isArrayType() ? QualType(t->getArrayElementTypeNoTypeQual(), 0) : t->getPointeeType();
    }
    if (t.isNull()) return true;
    if (const CXXRecordDecl* rd = t->getAsCXXRecordDecl()) {
      if (rd->isLambda() || rd->isLocalClass() != nullptr ||
          (rd->getIdentifier() == nullptr && rd->getTypedefNameForAnonDecl() == nullptr)) {
        return false;
      }
      if (const auto* cs = dyn_cast<ClassTemplateSpecializationDecl>(rd)) {
        return Nameable(&cs->getTemplateArgs());
      }
    }
    return true;
  }

  // `template __global__ void ns::k<256, false>(const float *, int);`
  std::string Instantiation() const {
    PrintingPolicy pp = ctx_.getPrintingPolicy();
    pp.SuppressTagKeyword = false;
    pp.FullyQualifiedName = true;
    pp.PrintCanonicalTypes = true;
    std::string params;
    for (const ParmVarDecl* p : kernel_->parameters()) {
      if (!params.empty()) params += ", ";
      params += p->getType().getCanonicalType().getAsString(pp);
    }
    return "template __global__ void " + KernelName() + "(" + params + ");";
  }

  std::string Origin(SourceLocation loc) const {
    PresumedLoc p = sm_.getPresumedLoc(sm_.getExpansionLoc(loc));
    if (p.isInvalid()) return "?";
    std::string name = p.getFilename();
    if (name.compare(0, opt_.root.size() + 1, opt_.root + "/") == 0) {
      name = name.substr(opt_.root.size() + 1);
    } else {
      llvm::SmallString<256> real;
      if (!llvm::sys::fs::real_path(name, real)) {
        std::string r(real.str());
        if (r.compare(0, opt_.root.size() + 1, opt_.root + "/") == 0) {
          name = r.substr(opt_.root.size() + 1);
        }
      }
    }
    return name + ":" + std::to_string(p.getLine());
  }

  const FunctionDecl* FindKernel() {
    std::unique_ptr<MangleContext> mc(ctx_.createMangleContext());
    const FunctionDecl* found = nullptr;
    const std::string wanted = llvm::demangle(opt_.symbol);
    auto check = [&](const FunctionDecl* fd) {
      if (found != nullptr || fd == nullptr || !fd->hasAttr<CUDAGlobalAttr>()) return;
      if (fd->getDescribedFunctionTemplate() != nullptr) return;  // the pattern itself
      std::string name;
      llvm::raw_string_ostream os(name);
      if (mc->shouldMangleDeclName(fd)) {
        mc->mangleName(GlobalDecl(fd), os);
      } else {
        os << fd->getName();
      }
      // Clang marks internal linkage in the name (_ZL...), nvcc does not:
      // the same function when the demangled names agree.
      if (os.str() == opt_.symbol || llvm::demangle(os.str()) == wanted) found = fd;
      if (std::getenv("KERNCAP_SLICE_DEBUG") != nullptr) {
        llvm::errs() << "kerncap-cuda-slice: kernel " << os.str() << "\n";
      }
    };
    std::vector<const DeclContext*> todo = {ctx_.getTranslationUnitDecl()};
    while (!todo.empty() && found == nullptr) {
      const DeclContext* dc = todo.back();
      todo.pop_back();
      for (const Decl* d : dc->decls()) {
        if (const auto* ft = dyn_cast<FunctionTemplateDecl>(d)) {
          for (const FunctionDecl* s : ft->specializations()) check(s);
        } else if (const auto* fd = dyn_cast<FunctionDecl>(d)) {
          check(fd);
        } else if (const auto* inner = dyn_cast<DeclContext>(d)) {
          if (isa<NamespaceDecl>(d) || isa<LinkageSpecDecl>(d) || isa<ExportDecl>(d)) {
            todo.push_back(inner);
          }
        }
      }
    }
    return found;
  }

  // A name found through a using-directive leaves no trace in the AST (its
  // use refers to the declaration directly), so the walk cannot see which
  // directives the kernel needs: every namespace-scope `using namespace N;`
  // of the project's files is copied, at its place, when N holds a
  // declaration the kernel reaches (llama.cpp's `using namespace
  // ggml_cuda_mma;` for its tile templates; `using namespace nvcuda;`). A
  // toolkit N brings the #include that declares it.
  void CopyUsingDirectives() {
    std::set<const NamespaceDecl*> used;
    for (const Decl* d : reached_) {
      for (const DeclContext* dc = d->getDeclContext(); dc != nullptr; dc = dc->getParent()) {
        if (const auto* ns = dyn_cast<NamespaceDecl>(dc)) used.insert(ns->getOriginalNamespace());
      }
    }
    std::vector<const DeclContext*> todo = {ctx_.getTranslationUnitDecl()};
    while (!todo.empty()) {
      const DeclContext* dc = todo.back();
      todo.pop_back();
      for (const Decl* d : dc->decls()) {
        if (const auto* ud = dyn_cast<UsingDirectiveDecl>(d)) {
          const NamespaceDecl* n = ud->getNominatedNamespace();
          if (n == nullptr || used.count(n->getOriginalNamespace()) == 0) continue;
          if (!kinds_.IsProject(ud->getLocation())) continue;
          decl_items_.emplace(ud, "");
          if (!kinds_.IsProject(n->getOriginalNamespace()->getLocation())) {
            NoteSystem(n->getOriginalNamespace());
          }
        } else if (isa<NamespaceDecl>(d) || isa<LinkageSpecDecl>(d)) {
          todo.push_back(cast<DeclContext>(d));
        }
      }
    }
  }

  // The declaration at namespace scope whose text holds `d` (lexically).
  const Decl* Holder(const Decl* d) const {
    const Decl* h = d;
    while (true) {
      const DeclContext* dc = h->getLexicalDeclContext();
      if (dc == nullptr) return nullptr;
      if (dc->isFileContext() || isa<LinkageSpecDecl>(dc) || isa<ExportDecl>(dc)) break;
      const Decl* parent = dyn_cast<Decl>(dc);
      if (parent == nullptr) return nullptr;
      h = parent;
    }
    if (const auto* fd = dyn_cast<FunctionDecl>(h)) {
      if (const FunctionTemplateDecl* t = fd->getDescribedFunctionTemplate()) return t;
    }
    if (const auto* rd = dyn_cast<CXXRecordDecl>(h)) {
      if (const ClassTemplateDecl* t = rd->getDescribedClassTemplate()) return t;
    }
    if (const auto* vd = dyn_cast<VarDecl>(h)) {
      if (const VarTemplateDecl* t = vd->getDescribedVarTemplate()) return t;
    }
    if (const auto* td = dyn_cast<TypedefNameDecl>(h)) {
      if (const auto* ta = dyn_cast<TypeAliasDecl>(td)) {
        if (const TypeAliasTemplateDecl* t = ta->getDescribedAliasTemplate()) return t;
      }
    }
    return h;
  }

  // The declarations whose text a use of `d` needs (all its redeclarations),
  // and the instantiations to walk.
  void Reach(const Decl* d) {
    if (d == nullptr || !reached_.insert(d).second) return;
    if (isa<ParmVarDecl>(d) || isa<TemplateTypeParmDecl>(d) || isa<NonTypeTemplateParmDecl>(d) ||
        isa<TemplateTemplateParmDecl>(d) || isa<NamespaceDecl>(d) || isa<TranslationUnitDecl>(d)) {
      return;
    }
    if (d->getLocation().isInvalid()) return;  // builtins
    if (const auto* vd = dyn_cast<VarDecl>(d); vd != nullptr && vd->isLocalVarDeclOrParm()) return;
    if (const auto* us = dyn_cast<UsingShadowDecl>(d)) {
      Reach(us->getIntroducer());
      Reach(us->getTargetDecl());
      return;
    }
    // Instantiations: walked for what their dependent names became; the text
    // is their pattern's.
    const Decl* pattern = d;
    if (const auto* fd = dyn_cast<FunctionDecl>(d)) {
      if (const FunctionDecl* p = fd->getTemplateInstantiationPattern()) {
        if (fd->getBody() != nullptr && fd != p) walk_.push_back(fd);
        pattern = p;
      }
    } else if (const auto* cs = dyn_cast<ClassTemplateSpecializationDecl>(d)) {
      if (cs->getSpecializationKind() == TSK_ImplicitInstantiation ||
          cs->getSpecializationKind() == TSK_ExplicitInstantiationDefinition ||
          cs->getSpecializationKind() == TSK_ExplicitInstantiationDeclaration) {
        walk_.push_back(cs);
        auto from = cs->getSpecializedTemplateOrPartial();
        if (auto* partial = from.dyn_cast<ClassTemplatePartialSpecializationDecl*>()) {
          pattern = partial;
        } else {
          pattern = from.get<ClassTemplateDecl*>();
        }
      } else {
        Reach(cs->getSpecializedTemplate());
      }
    } else if (const auto* rd = dyn_cast<CXXRecordDecl>(d)) {
      if (const CXXRecordDecl* p = rd->getTemplateInstantiationPattern(); p != nullptr && p != rd) {
        walk_.push_back(rd);
        pattern = p;
      }
    } else if (const auto* vd = dyn_cast<VarDecl>(d)) {
      if (const VarDecl* p = vd->getTemplateInstantiationPattern(); p != nullptr && p != vd) {
        walk_.push_back(vd);
        pattern = p;
      }
    } else if (const auto* ed = dyn_cast<EnumDecl>(d)) {
      if (const EnumDecl* p = ed->getTemplateInstantiationPattern(); p != nullptr && p != ed) {
        pattern = p;
      }
    }
    if (pattern != d) {
      Reach(pattern);
      return;
    }
    // Templates: the templated declaration's redeclarations.
    std::vector<const Decl*> redecls;
    for (const Decl* r : d->redecls()) redecls.push_back(r);
    if (const auto* t = dyn_cast<TemplateDecl>(d)) {
      if (const NamedDecl* td = t->getTemplatedDecl()) {
        for (const Decl* r : td->redecls()) redecls.push_back(r);
      }
    }
    for (const Decl* r : redecls) {
      const Decl* h = Holder(r);
      if (h == nullptr || h->getLocation().isInvalid()) continue;
      if (!kinds_.IsProject(h->getLocation())) {
        NoteSystem(h);
        continue;
      }
      if (decl_items_.count(h) != 0) continue;
      decl_items_[h] = "";
      walk_.push_back(h);
      if (h != r) Reach(h);
    }
  }

  // A toolkit/system declaration: the first #include of a project file (in
  // the unit's order) whose file includes, directly or not, the one that
  // declares it. None: it came with the compiler's implicit runtime header,
  // which nvcc includes too.
  void NoteSystem(const Decl* d) {
    NoteSystemAt(sm_.getExpansionLoc(d->getLocation()), /*macro=*/false);
  }
 public:
  // A declaration: the chain of #includes that entered its file this time,
  // up to a project file's #include (what clang parsed); when the chain
  // starts outside the project (the compiler's implicit runtime header came
  // first), an #include already chosen that reaches the file, else the
  // nearest project #include that does (NoteSystemFile).
  // A macro: the nearest project #include first. Whether a header defines a
  // macro can depend on how it is entered (stdio.h enters stdarg.h for
  // va_list alone), and clang's own headers differ from gcc's there, so the
  // #include the project wrote for it is the best guess.
  void NoteSystemAt(SourceLocation loc, bool macro) {
    const FileEntry* file = sm_.getFileEntryForID(sm_.getFileID(loc));
    if (macro && NoteSystemFile(file, /*reuse=*/false)) return;
    for (FileID fid = sm_.getFileID(loc); fid.isValid();) {
      SourceLocation inc = sm_.getIncludeLoc(fid);
      if (inc.isInvalid()) break;
      FileID parent = sm_.getFileID(inc);
      if (kinds_.IsProject(parent)) {
        if (std::optional<size_t> i = pp_.ProjectIncludeAt(inc)) {
          system_includes_[*i] = pp_.project_includes()[*i];
          return;
        }
        break;
      }
      fid = parent;
    }
    if (!macro) NoteSystemFile(file, /*reuse=*/true);
  }
  // Whether a project #include reaches `target` (noted when it does): the
  // nearest one (fewest steps in the include graph: a header that reaches
  // the file through a long chain may include it only in part, e.g. stdio.h
  // includes stdarg.h for va_list alone), the first in the unit's order
  // among equals. clang's headers are not gcc's, so the #include the
  // project wrote for a name is the best guess; the verification decides.
  bool NoteSystemFile(const FileEntry* target, bool reuse) {
    if (target == nullptr) return false;
    if (auto done = noted_files_.find(target); done != noted_files_.end()) return done->second;
    const std::vector<IncludeRecord>& incs = pp_.project_includes();
    if (reach_.empty()) reach_.resize(incs.size());
    size_t best = incs.size();
    int best_depth = 0;
    for (size_t i = 0; i < incs.size(); ++i) {
      if (reach_[i].empty()) {  // breadth first: each file's depth
        std::vector<const FileEntry*> level = {incs[i].file};
        reach_[i][incs[i].file] = 0;
        for (int depth = 1; !level.empty(); ++depth) {
          std::vector<const FileEntry*> next;
          for (const FileEntry* f : level) {
            auto it = pp_.edges().find(f);
            if (it == pp_.edges().end()) continue;
            for (const FileEntry* g : it->second) {
              if (reach_[i].emplace(g, depth).second) next.push_back(g);
            }
          }
          level = std::move(next);
        }
      }
      auto d = reach_[i].find(target);
      if (d != reach_[i].end() && reuse && system_includes_.count(i) != 0) {
        noted_files_[target] = true;  // an #include already in the unit provides it
        return true;
      }
      if (d != reach_[i].end() && (best == incs.size() || d->second < best_depth)) {
        best = i;
        best_depth = d->second;
      }
    }
    if (best < incs.size()) system_includes_[best] = incs[best];
    noted_files_[target] = best < incs.size();
    return best < incs.size();
  }
 private:

  // The text of a namespace-scope declaration, with its wrappers.
  bool DeclText(const Decl* h, Item* it) {
    SourceLocation b = h->getBeginLoc(), e = h->getEndLoc();
    const Decl* attrs_of = h;
    if (const auto* t = dyn_cast<TemplateDecl>(h)) attrs_of = t->getTemplatedDecl();
    for (const Attr* a : attrs_of->attrs()) {
      if (a->isImplicit() || a->isInherited() || a->getLocation().isInvalid()) continue;
      SourceLocation al = sm_.getExpansionLoc(a->getRange().getBegin());
      SourceLocation bl = sm_.getExpansionLoc(b);
      if (sm_.getFileID(al) == sm_.getFileID(bl) && sm_.isBeforeInTranslationUnit(al, bl)) b = al;
    }
    CharSourceRange r = sm_.getExpansionRange(SourceRange(b, e));
    SourceLocation begin = r.getBegin();
    SourceLocation end = r.isTokenRange()
                             ? Lexer::getLocForEndOfToken(r.getEnd(), 0, sm_, ctx_.getLangOpts())
                             : r.getEnd();
    if (begin.isInvalid() || end.isInvalid() || sm_.getFileID(begin) != sm_.getFileID(end)) {
      SetFail("the text of " + Describe(h) + " (" + Origin(h->getLocation()) +
              ") does not lie in one file");
      return false;
    }
    FileID fid = sm_.getFileID(begin);
    StringRef buf = sm_.getBufferData(fid);
    unsigned bo = sm_.getFileOffset(begin), eo = sm_.getFileOffset(end);
    auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    // An attribute's range starts at its name, inside its brackets
    // ([[noreturn]], __attribute__((noinline))): when the text starts at one,
    // the brackets that open it belong to the declaration too.
    for (bool widened = begin != sm_.getExpansionLoc(h->getBeginLoc()); widened;) {
      widened = false;
      size_t q = bo;
      while (q > 0 && blank(buf[q - 1])) --q;
      if (q >= 2 && buf.substr(q - 2, 2) == "[[") {
        bo = static_cast<unsigned>(q - 2);
        widened = true;
      } else if (q >= 2 && buf.substr(q - 2, 2) == "((") {
        size_t r = q - 2;
        while (r > 0 && (buf[r - 1] == ' ' || buf[r - 1] == '\t')) --r;
        if (r >= 13 && buf.substr(r - 13, 13) == "__attribute__") {
          bo = static_cast<unsigned>(r - 13);
          widened = true;
        }
      }
    }
    // A declaration's ';' is not part of its range.
    size_t k = eo;
    while (k < buf.size() && blank(buf[k])) ++k;
    if (k < buf.size() && buf[k] == ';') eo = k + 1;
    if (eo <= bo || eo > buf.size()) {
      SetFail("empty text for " + Describe(h) + " (" + Origin(h->getLocation()) + ")");
      return false;
    }
    it->kind = Item::kDecl;
    it->key = begin;
    it->file = fid;
    it->begin = bo;
    it->end = eo;
    it->text = buf.substr(bo, eo - bo).str();
    it->origin = Origin(begin);
    std::vector<std::string> open;
    for (const DeclContext* dc = h->getLexicalDeclContext(); dc != nullptr && !dc->isTranslationUnit();
         dc = dc->getLexicalParent()) {
      if (const auto* ns = dyn_cast<NamespaceDecl>(dc)) {
        open.push_back(std::string(ns->isInline() ? "inline " : "") + "namespace " +
                       (ns->isAnonymousNamespace() ? std::string() : ns->getName().str() + " ") +
                       "{\n");
      } else if (const auto* ls = dyn_cast<LinkageSpecDecl>(dc)) {
        open.push_back(ls->getLanguage() == LinkageSpecDecl::lang_c ? "extern \"C\" {\n"
                                                                      : "extern \"C++\" {\n");
      } else {
        SetFail("unexpected context around " + Describe(h));
        return false;
      }
    }
    std::reverse(open.begin(), open.end());
    it->open = open;
    it->close.assign(open.size(), "}\n");
    return true;
  }

  static std::string Describe(const Decl* d) {
    if (const auto* nd = dyn_cast<NamedDecl>(d)) return nd->getQualifiedNameAsString();
    return d->getDeclKindName();
  }

  ASTContext& ctx_;
  SourceManager& sm_;
  PPRecorder& pp_;
  FileKinds& kinds_;
  const Options& opt_;
  const FunctionDecl* kernel_ = nullptr;
  std::set<const Decl*> reached_;
  std::vector<const Decl*> walk_;
  std::map<const Decl*, std::string> decl_items_;
  std::map<size_t, IncludeRecord> system_includes_;  // by index in project_includes()
  std::map<const FileEntry*, bool> noted_files_;  // reached by a project #include?
  std::vector<std::map<const FileEntry*, int>> reach_;  // per project #include: depths
};

class SliceConsumer : public ASTConsumer {
 public:
  SliceConsumer(CompilerInstance& ci, const Options& opt, FileKinds* kinds, PPRecorder* pp)
      : ci_(ci), opt_(opt), kinds_(kinds), pp_(pp) {}
  void HandleTranslationUnit(ASTContext& ctx) override {
    DiagnosticsEngine& diags = ci_.getDiagnostics();
    if (diags.hasFatalErrorOccurred()) {
      SetFail("clang stopped at a fatal error while parsing the unit (see the messages above)");
      return;
    }
    Slicer s(ctx, *pp_, *kinds_, opt_);
    if (!s.Run()) return;
    std::string unit, report;
    if (!s.Emit(&unit, &report)) return;
    report += ", \"parse_errors\": " + std::to_string(diags.getClient()->getNumErrors()) + "}";
    std::error_code ec;
    llvm::raw_fd_ostream out(opt_.out, ec);
    if (ec) {
      SetFail("cannot write " + opt_.out + ": " + ec.message());
      return;
    }
    out << unit;
    if (!opt_.report.empty()) {
      llvm::raw_fd_ostream rep(opt_.report, ec);
      if (ec) {
        SetFail("cannot write " + opt_.report + ": " + ec.message());
        return;
      }
      rep << report << "\n";
    }
    written_ = true;
  }
  bool written() const { return written_; }

 private:
  CompilerInstance& ci_;
  const Options& opt_;
  FileKinds* kinds_;
  PPRecorder* pp_;
  bool written_ = false;
};

bool g_written = false;

class SliceAction : public ASTFrontendAction {
 public:
  explicit SliceAction(const Options& opt) : opt_(opt) {}
  std::unique_ptr<ASTConsumer> CreateASTConsumer(CompilerInstance& ci, StringRef) override {
    kinds_ = std::make_unique<FileKinds>(ci.getSourceManager(), opt_.root);
    auto pp = std::make_unique<PPRecorder>(ci.getSourceManager(), *kinds_, ci.getLangOpts());
    PPRecorder* raw = pp.get();
    ci.getPreprocessor().addPPCallbacks(std::move(pp));
    // Errors do not stop the slice (clang 15 lacks a few of the newest
    // toolkit's intrinsics): the verification compile says whether it is
    // complete.
    return std::make_unique<Consumer>(ci, opt_, kinds_.get(), raw);
  }

 private:
  class Consumer : public SliceConsumer {
   public:
    using SliceConsumer::SliceConsumer;
    ~Consumer() override { g_written = g_written || written(); }
  };
  const Options& opt_;
  std::unique_ptr<FileKinds> kinds_;
};

// Device functions nvcc declares and clang 15's CUDA wrapper does not: the
// toolkit's crt/sm_80_rt.h, sm_90_rt.h and sm_100_rt.h (warp reductions,
// clusters, float2/float4 atomics, paired float math) and the cache-hint
// loads and stores of sm_32_intrinsics.h (the wrapper skips that header; it
// defines __ldg itself). Declared for the parse only, from the toolkit's own
// headers (one declaration per line there, "MACRO_DECL__ <decl> __DEF_IF_HOST"),
// so a kernel that calls __reduce_add_sync parses. Never copied: a
// declaration that no project #include reaches came with the compiler's
// implicit runtime header, which nvcc has too (NoteSystem).
std::string CompatDeclarations(const std::string& cuda_path) {
  if (cuda_path.empty()) return "";
  struct Source {
    const char* header;
    const char* only;  // a name prefix the declaration must have; "": any
  };
  static const Source kSources[] = {
      {"crt/sm_80_rt.h", ""},           {"crt/sm_90_rt.h", ""},      {"crt/sm_100_rt.h", ""},
      {"sm_32_intrinsics.h", "__ldc"},  {"sm_32_intrinsics.h", "__ldlu"},
      {"sm_32_intrinsics.h", "__st"},
  };
  std::string out = "// kerncap-cuda-slice: toolkit device functions clang 15 lacks (parse only)\n";
  for (const Source& src : kSources) {
    auto buf = llvm::MemoryBuffer::getFile(cuda_path + "/include/" + src.header);
    if (!buf) continue;
    llvm::SmallVector<StringRef, 0> lines;
    (*buf)->getBuffer().split(lines, '\n');
    for (StringRef line : lines) {
      line = line.trim();
      if (!line.startswith("__SM_") || !line.endswith("__DEF_IF_HOST")) continue;
      StringRef decl = line.drop_front(line.find(' ')).drop_back(strlen("__DEF_IF_HOST")).trim();
      // Types the wrapper has not declared yet (the fp16/bf16 headers come
      // later, with the unit's own #includes) are left out.
      if (decl.contains("__half") || decl.contains("bfloat") || !decl.endswith(")")) continue;
      const size_t paren = decl.find('(');
      if (paren == StringRef::npos) continue;
      StringRef head = decl.take_front(paren).rtrim();
      StringRef name = head.substr(head.find_last_of(" *&") + 1);
      if (*src.only != '\0' && !name.startswith(src.only)) continue;
      out += "static __device__ __inline__ " + decl.str() + ";\n";
    }
  }
  return out;
}

// clang's resource folder: --resource-dir, else ../lib/kerncap-clang beside
// this binary. Empty (and *why set) when it lacks clang's CUDA wrapper
// header: without it clang cannot set up CUDA mode (it -includes that
// wrapper) and every slice would fail with parse errors far from the cause.
std::string ResourceDir(const std::string& given, const char* argv0, std::string* why) {
  std::string dir = given;
  if (dir.empty()) {
    static int anchor;
    const std::string self = llvm::sys::fs::getMainExecutable(argv0, &anchor);
    if (self.empty()) {
      *why = "cannot locate this binary to find clang's resource headers (give --resource-dir=DIR)";
      return "";
    }
    llvm::SmallString<256> d(llvm::sys::path::parent_path(self));
    llvm::sys::path::append(d, "..", "lib", "kerncap-clang");
    dir = std::string(d.str());
  }
  const std::string wrapper = dir + "/include/__clang_cuda_runtime_wrapper.h";
  if (!llvm::sys::fs::exists(wrapper)) {
    *why = "clang's resource headers are missing: no " + wrapper +
           " (the installation is incomplete: copy clang 15's lib/clang/15.*/include there, or "
           "give --resource-dir=DIR)";
    return "";
  }
  return dir;
}

int Usage(const char* why) {
  std::fprintf(stderr,
               "kerncap-cuda-slice: %s\nusage: kerncap-cuda-slice --symbol=MANGLED --root=DIR "
               "--out=FILE [--report=FILE] [--cuda-path=DIR] [--cuda-arch-macro=N] "
               "[--resource-dir=DIR] -- CLANG_ARGS... UNIT\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    auto value = [&a](const char* flag) -> const char* {
      size_t n = std::char_traits<char>::length(flag);
      return a.compare(0, n, flag) == 0 ? a.c_str() + n : nullptr;
    };
    if (const char* v = value("--symbol=")) {
      opt.symbol = v;
    } else if (const char* v = value("--root=")) {
      opt.root = v;
    } else if (const char* v = value("--out=")) {
      opt.out = v;
    } else if (const char* v = value("--report=")) {
      opt.report = v;
    } else if (const char* v = value("--cuda-path=")) {
      opt.cuda_path = v;
    } else if (const char* v = value("--cuda-arch-macro=")) {
      opt.arch_macro = v;
    } else if (const char* v = value("--resource-dir=")) {
      opt.resource_dir = v;
    } else {
      return Usage(("unknown option " + a).c_str());
    }
  }
  for (; i < argc; ++i) opt.clang_args.push_back(argv[i]);
  if (opt.symbol.empty() || opt.root.empty() || opt.out.empty() || opt.clang_args.empty()) {
    return Usage("--symbol, --root, --out and the clang arguments are required");
  }
  llvm::SmallString<256> root;
  if (llvm::sys::fs::real_path(opt.root, root)) return Usage("--root does not exist");
  opt.root = std::string(root.str());
  while (opt.root.size() > 1 && opt.root.back() == '/') opt.root.pop_back();
  {
    std::string why;
    opt.resource_dir = ResourceDir(opt.resource_dir, argv[0], &why);
    if (opt.resource_dir.empty()) {
      std::fprintf(stderr, "kerncap-cuda-slice: %s\n", why.c_str());
      return 3;
    }
  }

  // Clang 15 and a newer CUDA: it knows GPUs up to sm_86 (the kernel's own
  // __CUDA_ARCH__ is given with --cuda-arch-macro, so the kernel's #if
  // branches are those of the captured GPU), warns about the version, and
  // its texture wrapper needs the texture references CUDA 12 removed (not
  // used by anything copied: an empty texture_fetch_functions.h and the
  // wrapper's include guard skip them).
  llvm::SmallString<128> shim;
  if (llvm::sys::fs::createUniqueDirectory("kerncap-slice-shim", shim)) {
    return Usage("cannot create a temporary folder");
  }
  {
    std::error_code ec;
    llvm::raw_fd_ostream(std::string(shim.str()) + "/texture_fetch_functions.h", ec) << "";
  }
  const std::string compat = std::string(shim.str()) + "/kerncap_cuda_compat.h";
  {
    std::error_code ec;
    llvm::raw_fd_ostream(compat, ec) << CompatDeclarations(opt.cuda_path);
  }
  std::vector<std::string> args = {"clang++", "-fsyntax-only", "-x", "cuda", "--cuda-device-only",
                                   "--cuda-gpu-arch=sm_80", "-Wno-unknown-cuda-version",
                                   "-w", "-D__CLANG_CUDA_TEXTURE_INTRINSICS_H__", "-isystem",
                                   std::string(shim.str()), "-resource-dir", opt.resource_dir};
  if (!opt.cuda_path.empty()) {
    args.push_back("--cuda-path=" + opt.cuda_path);
    // nvcc searches CCCL's folder (cuda/std, cub, thrust) itself; clang 15
    // does not know it.
    const std::string cccl = opt.cuda_path + "/include/cccl";
    if (llvm::sys::fs::is_directory(cccl)) {
      args.push_back("-isystem");
      args.push_back(cccl);
    }
  }
  if (!opt.arch_macro.empty()) {
    args.push_back("-U__CUDA_ARCH__");
    args.push_back("-D__CUDA_ARCH__=" + opt.arch_macro);
  }
  args.push_back("-include");
  args.push_back(compat);
  args.insert(args.end(), opt.clang_args.begin(), opt.clang_args.end());
  auto files = llvm::makeIntrusiveRefCnt<FileManager>(FileSystemOptions());
  tooling::ToolInvocation inv(args, std::make_unique<SliceAction>(opt), files.get());
  inv.run();  // false on parse errors, which are tolerated (see SliceAction)
  llvm::sys::fs::remove_directories(shim);
  if (!g_written) {
    std::fprintf(stderr, "kerncap-cuda-slice: %s\n",
                 Fail.empty() ? "clang could not parse the unit (see the messages above)"
                              : Fail.c_str());
    return 1;
  }
  return 0;
}
