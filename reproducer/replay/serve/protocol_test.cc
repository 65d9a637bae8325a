#include "reproducer/replay/serve/protocol.h"

#include <limits>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kerncap::replay::serve {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

std::string Error(absl::string_view line) {
  absl::StatusOr<Request> r = ParseRequest(line);
  EXPECT_FALSE(r.ok()) << line;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

TEST(ProtocolTest, ParsesAFullEvaluateRequest) {
  auto r = ParseRequest(
      R"({"op":"evaluate","id":7,"code_object_path":"/tmp/c.cubin","kernel":"_Z3foov",)"
      R"("iterations":20,"warmup":0,"validate":false,"restore_each":false,)"
      R"("tolerance":{"dtype":"f32","region_dtype":["0x7f00:f16","3:i32"],"atol":1e-5,)"
      R"("rtol":0.001,"ulp":2,"nan_unequal":true}})"
      "\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->op, Op::kEvaluate);
  EXPECT_EQ(r->id, 7);
  const EvaluateRequest& e = r->evaluate;
  EXPECT_EQ(e.code_object_path, "/tmp/c.cubin");
  EXPECT_FALSE(e.code_object.has_value());
  EXPECT_EQ(e.kernel, "_Z3foov");
  EXPECT_EQ(e.iterations, 20);
  EXPECT_EQ(e.warmup, 0);
  EXPECT_FALSE(e.validate);
  ASSERT_TRUE(e.restore_each.has_value());
  EXPECT_FALSE(*e.restore_each);
  ASSERT_TRUE(e.compare.dtype.has_value());
  EXPECT_EQ(*e.compare.dtype, DType::kF32);
  ASSERT_EQ(e.compare.rules.size(), 2u);
  EXPECT_EQ(*e.compare.rules[0].va, 0x7f00u);
  EXPECT_EQ(e.compare.rules[0].dtype, DType::kF16);
  EXPECT_EQ(*e.compare.rules[1].index, 3u);
  EXPECT_DOUBLE_EQ(e.compare.tolerance.atol, 1e-5);
  EXPECT_DOUBLE_EQ(e.compare.tolerance.rtol, 1e-3);
  EXPECT_EQ(e.compare.tolerance.ulp, 2u);
  EXPECT_FALSE(e.compare.tolerance.nan_equal);
}

TEST(ProtocolTest, DefaultsAndInlineCode) {
  const std::string bytes("\x7f" "ELF\x02\x01\x00binary", 13);
  auto r = ParseRequest(json{{"op", "evaluate"}, {"code_object_b64", absl::Base64Escape(bytes)}}
                            .dump());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->id.is_null());
  ASSERT_TRUE(r->evaluate.code_object.has_value());
  EXPECT_EQ(*r->evaluate.code_object, bytes);
  EXPECT_EQ(r->evaluate.iterations, kDefaultIterations);
  EXPECT_EQ(r->evaluate.warmup, kDefaultWarmup);
  EXPECT_TRUE(r->evaluate.validate);
  EXPECT_FALSE(r->evaluate.restore_each.has_value());
  EXPECT_FALSE(r->evaluate.compare.dtype.has_value());
  EXPECT_TRUE(r->evaluate.compare.tolerance.exact());
}

TEST(ProtocolTest, InfoAndShutdown) {
  auto i = ParseRequest(R"({"op":"info","id":"a"})");
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(i->op, Op::kInfo);
  EXPECT_EQ(i->id, "a");
  auto s = ParseRequest(R"({"op":"shutdown"})");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->op, Op::kShutdown);
  EXPECT_THAT(Error(R"({"op":"info","iterations":3})"), HasSubstr("unknown key 'iterations'"));
}

TEST(ProtocolTest, RejectsMalformedRequestsClearly) {
  EXPECT_THAT(Error("{\"op\": \"evaluate\""), HasSubstr("not JSON"));
  EXPECT_THAT(Error("\n"), HasSubstr("empty line"));
  EXPECT_THAT(Error("[1,2]"), HasSubstr("expected a JSON object, got array"));
  EXPECT_THAT(Error(R"({"id":1})"), HasSubstr("missing 'op'"));
  EXPECT_THAT(Error(R"({"op":3})"), HasSubstr("'op' must be a string"));
  EXPECT_THAT(Error(R"({"op":"launch"})"), HasSubstr("unknown op 'launch'"));
  EXPECT_THAT(Error(R"({"op":"evaluate"})"), HasSubstr("missing code object"));
  EXPECT_THAT(Error(R"({"op":"evaluate","code_object_path":"a","code_object_b64":"YQ=="})"),
              HasSubstr("either code_object_path or code_object_b64, not both"));
  EXPECT_THAT(Error(R"({"op":"evaluate","code_object_path":""})"),
              HasSubstr("non-empty string"));
  EXPECT_THAT(Error(R"({"op":"evaluate","code_object_b64":"!!not base64!!"})"),
              HasSubstr("not valid base64"));
  EXPECT_THAT(Error(R"({"op":"evaluate","code_object_path":"a","iterations":-1})"),
              HasSubstr("'iterations' must be between 0 and 100000 (got -1)"));
  EXPECT_THAT(Error(R"({"op":"evaluate","code_object_path":"a","iterations":1e9})"),
              HasSubstr("'iterations' must be an integer"));
  EXPECT_THAT(Error(R"({"op":"evaluate","code_object_path":"a","iterations":100001})"),
              HasSubstr("between 0 and 100000"));
  EXPECT_THAT(Error(R"({"op":"evaluate","code_object_path":"a","iterations":18446744073709551615})"),
              HasSubstr("between 0 and 100000"));
  EXPECT_THAT(Error(R"({"op":"evaluate","code_object_path":"a","warmup":-2})"),
              HasSubstr("'warmup' must be between 0 and 10000"));
  EXPECT_THAT(Error(R"({"op":"evaluate","code_object_path":"a","iteration":5})"),
              HasSubstr("unknown key 'iteration'"));
  EXPECT_THAT(Error(R"({"op":"evaluate","code_object_path":"a","validate":"yes"})"),
              HasSubstr("'validate' must be true or false"));
  EXPECT_THAT(Error(R"({"op":"evaluate","code_object_path":"a","kernel":7})"),
              HasSubstr("'kernel' must be a non-empty string"));
  EXPECT_THAT(Error(R"({"op":"evaluate","code_object_path":"a","tolerance":1})"),
              HasSubstr("'tolerance' must be an object"));
  EXPECT_THAT(Error(R"({"op":"evaluate","code_object_path":"a","tolerance":{"atol":-1}})"),
              HasSubstr("'atol' must be a finite number >= 0"));
  EXPECT_THAT(Error(R"({"op":"evaluate","code_object_path":"a","tolerance":{"dtype":"f7"}})"),
              HasSubstr("unknown dtype 'f7'"));
  EXPECT_THAT(Error(R"({"op":"evaluate","code_object_path":"a","tolerance":{"ulp":-3}})"),
              HasSubstr("'ulp' must be an integer >= 0"));
  EXPECT_THAT(
      Error(R"({"op":"evaluate","code_object_path":"a","tolerance":{"region_dtype":["x"]}})"),
      HasSubstr("expected SEL:DTYPE"));
  EXPECT_THAT(Error(R"({"op":"evaluate","code_object_path":"a","tolerance":{"abs":1}})"),
              HasSubstr("unknown key 'abs' in tolerance"));
}

TEST(ProtocolTest, RecoversTheIdOfABadRequest) {
  EXPECT_EQ(RequestId(R"({"op":"nope","id":42})"), 42);
  EXPECT_TRUE(RequestId("garbage").is_null());
}

TEST(ProtocolTest, RequestJsonRoundTrips) {
  EvaluateRequest r;
  r.code_object = std::string("\0\1\2PTX", 6);
  r.kernel = "k";
  r.iterations = 3;
  r.warmup = 1;
  r.validate = false;
  r.restore_each = true;
  r.tolerance_json = {{"dtype", "bf16"}, {"rtol", 0.01}};
  auto back = ParseRequest(ToLine(EvaluateRequestJson(r, "x")));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->id, "x");
  EXPECT_EQ(*back->evaluate.code_object, *r.code_object);
  EXPECT_EQ(back->evaluate.kernel, "k");
  EXPECT_EQ(back->evaluate.iterations, 3);
  EXPECT_EQ(back->evaluate.warmup, 1);
  EXPECT_FALSE(back->evaluate.validate);
  EXPECT_TRUE(*back->evaluate.restore_each);
  EXPECT_EQ(*back->evaluate.compare.dtype, DType::kBF16);
  EXPECT_DOUBLE_EQ(back->evaluate.compare.tolerance.rtol, 0.01);

  EvaluateRequest p;
  p.code_object_path = "/x.cubin";
  json j = EvaluateRequestJson(p, nullptr);
  EXPECT_FALSE(j.contains("id"));
  EXPECT_FALSE(j.contains("tolerance"));
  EXPECT_EQ(j["code_object_path"], "/x.cubin");
}

TEST(ProtocolTest, FormatsAnswers) {
  EvaluateResult r;
  r.kernel = "k";
  r.validated = true;
  r.validation.regions_compared = 3;
  r.validation.regions_failing = 1;
  RegionVerdict v;
  v.index = 2;
  v.va = 0x7f0000001000;
  v.replay_va = 0x7f0000001000;
  v.kind = "device";
  v.size = 64;
  v.written = true;
  v.dtype = DType::kF32;
  v.passed = false;
  v.mismatches = 4;
  v.differing = 5;
  v.worst_abs = std::numeric_limits<double>::infinity();
  v.worst_rel = 0.5;
  v.first_mismatch_offset = 8;
  v.first_mismatch = {{1.0, 2.0}};
  r.validation.regions.push_back(v);
  r.kernel_ms = ComputeBenchStats({1.0, 3.0, 2.0});
  r.kernel_total_ms = 6.5;
  r.wall_ms = 9.0;
  r.overhead_ms = 2.5;
  r.warnings = {"w"};
  const std::string line = ToLine(EvaluateAnswer(3, r));
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);  // one line
  json j = json::parse(line);
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_EQ(j["id"], 3);
  EXPECT_FALSE(j["validation"]["passed"].get<bool>());
  EXPECT_EQ(j["validation"]["regions_failing"], 1);
  const json& reg = j["validation"]["regions"][0];
  EXPECT_EQ(reg["va"], "0x7f0000001000");
  EXPECT_EQ(reg["dtype"], "f32");
  EXPECT_EQ(reg["mismatches"], 4);
  EXPECT_EQ(reg["worst_abs"], "inf");
  EXPECT_EQ(j["validation"]["verdict"], "fail");
  EXPECT_EQ(j["verdicts_pass"], false);
  EXPECT_EQ(reg["first_mismatch"]["actual"], 2.0);
  EXPECT_EQ(j["kernel_ms"]["median"], 2.0);
  EXPECT_EQ(j["kernel_ms"]["iterations"], 3);
  EXPECT_EQ(j["overhead_ms"], 2.5);
  EXPECT_EQ(j["warnings"][0], "w");

  r.validated = false;
  EXPECT_FALSE(EvaluateAnswer(nullptr, r).contains("validation"));

  json e = ErrorAnswer("q", absl::NotFoundError("no kernel"), /*context_lost=*/true);
  EXPECT_FALSE(e["ok"].get<bool>());
  EXPECT_EQ(e["error"], "no kernel");
  EXPECT_EQ(e["code"], "NOT_FOUND");
  EXPECT_TRUE(e["context_lost"].get<bool>());
  EXPECT_FALSE(ErrorAnswer(nullptr, absl::InternalError("x")).contains("context_lost"));

  json i = InfoAnswer(1, {{"capture_id", "cap-1"}});
  EXPECT_EQ(i["op"], "info");
  EXPECT_EQ(i["capture_id"], "cap-1");
  EXPECT_EQ(ShutdownAnswer(nullptr)["op"], "shutdown");
  // Bytes that are not UTF-8 do not break the line.
  EXPECT_NO_THROW(ToLine(ErrorAnswer(nullptr, absl::InternalError("bad \xff byte"))));
}

TEST(ProtocolTest, CompareOriginalRequestAndAnswer) {
  auto r = ParseRequest(
      R"({"op":"evaluate","code_object_path":"/c.cubin","compare_original":true})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->evaluate.compare_original);
  auto d = ParseRequest(R"({"op":"evaluate","code_object_path":"/c.cubin"})");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->evaluate.compare_original);
  EXPECT_THAT(Error(R"({"op":"evaluate","code_object_path":"/c","compare_original":1})"),
              HasSubstr("'compare_original' must be true or false"));
  // submit sends it only when asked.
  EXPECT_TRUE(EvaluateRequestJson(r->evaluate, nullptr)["compare_original"].get<bool>());
  EXPECT_FALSE(EvaluateRequestJson(d->evaluate, nullptr).contains("compare_original"));

  EvaluateResult res;
  res.kernel = "k";
  res.kernel_ms = ComputeBenchStats({2.0, 2.0, 2.0});
  EXPECT_FALSE(EvaluateAnswer(nullptr, res).contains("speedup"));
  res.compared = true;
  res.original_ms = ComputeBenchStats({1.0, 1.0, 1.5});
  res.speedup = ComputeSpeedup({1.0, 1.0, 1.5}, {2.0, 2.0, 2.0});
  json j = json::parse(ToLine(EvaluateAnswer(nullptr, res)));
  EXPECT_EQ(j["original_ms"]["median"], 1.0);
  EXPECT_EQ(j["original_ms"]["max"], 1.5);
  EXPECT_EQ(j["original_ms"]["iterations"], 3);
  EXPECT_EQ(j["speedup"], 0.5);
  EXPECT_EQ(j["speedup_pairs"]["pairs"], 3);
  EXPECT_EQ(j["speedup_pairs"]["max"], 0.75);
  EXPECT_EQ(j["speedup_pairs"]["median"], 0.5);
}

// A module variable the candidate lacks is in the verdict: "incomplete",
// never passed; a verdict after the timing that fails makes the answer fail
// even when the first one passed.
TEST(ProtocolTest, VerdictsSayWhatWasNotComparedAndWhatFailedAfterTheTiming) {
  EvaluateResult r;
  r.kernel = "k";
  r.validated = true;
  r.validation.regions_compared = 4;
  EXPECT_STREQ(r.validation.verdict(), "pass");
  EXPECT_TRUE(r.verdicts_pass());
  r.validation.not_compared.push_back(NotCompared{3, false, 0x7f3d00000400, "module_global",
                                                  "kc_bias", 4, "module variable not in the "
                                                  "candidate: not in the loaded code object"});
  EXPECT_STREQ(r.validation.verdict(), "incomplete");
  EXPECT_FALSE(r.validation.passed());
  EXPECT_FALSE(r.verdicts_pass());
  json j = json::parse(ToLine(EvaluateAnswer(1, r)));
  EXPECT_EQ(j["validation"]["verdict"], "incomplete");
  EXPECT_EQ(j["validation"]["passed"], false);
  EXPECT_EQ(j["validation"]["not_compared"][0]["name"], "kc_bias");
  EXPECT_EQ(j["verdicts_pass"], false);

  r.validation.not_compared.clear();
  r.revalidation.emplace();
  r.revalidation->regions_compared = 4;
  r.revalidation->regions_failing = 1;
  r.original_validation.emplace();
  r.original_validation->regions_compared = 4;
  r.cold_l2 = true;
  r.l2_flush_bytes = 100 << 20;
  r.persisting_l2.limit_before = 1 << 20;
  r.protocol = "restore; flush; start event; launch; stop event";
  r.moved = {MovedRegion{2, "host_pinned", 0x7f3c00001000, 256, 0x55d000001000, 0}};
  EXPECT_FALSE(r.verdicts_pass());
  j = json::parse(ToLine(EvaluateAnswer(1, r)));
  EXPECT_EQ(j["validation"]["verdict"], "pass");
  EXPECT_EQ(j["revalidation"]["verdict"], "fail");
  EXPECT_EQ(j["original_validation"]["before"]["verdict"], "pass");
  EXPECT_TRUE(j["original_validation"]["after"].is_null());
  EXPECT_EQ(j["verdicts_pass"], false);
  EXPECT_EQ(j["cold_l2"], true);
  EXPECT_EQ(j["l2_flush_bytes"], 100 << 20);
  EXPECT_EQ(j["persisting_l2"]["limit_before_bytes"], 1 << 20);
  EXPECT_EQ(j["protocol"], r.protocol);
  EXPECT_EQ(j["relocation"], "note");
  EXPECT_EQ(j["moved_ranges"][0]["kind"], "host_pinned");
  // No verdict asked for: nothing to fail.
  EvaluateResult none;
  EXPECT_TRUE(none.verdicts_pass());
  EXPECT_FALSE(EvaluateAnswer(1, none).contains("validation"));
  EXPECT_FALSE(EvaluateAnswer(1, none).contains("relocation"));
}

TEST(ProtocolTest, ColdL2IsARequestOption) {
  auto r = ParseRequest(R"({"op":"evaluate","code_object_path":"/c.cubin","cold_l2":true})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->evaluate.cold_l2);
  EXPECT_TRUE(EvaluateRequestJson(r->evaluate, nullptr)["cold_l2"].get<bool>());
  auto d = ParseRequest(R"({"op":"evaluate","code_object_path":"/c.cubin"})");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->evaluate.cold_l2);
  EXPECT_FALSE(EvaluateRequestJson(d->evaluate, nullptr).contains("cold_l2"));
  EXPECT_FALSE(ParseRequest(R"({"op":"evaluate","code_object_path":"/c","cold_l2":"yes"})").ok());
}

TEST(ProtocolTest, EvaluateTakesALaunchOverride) {
  auto r = ParseRequest(
      R"({"op":"evaluate","code_object_path":"/c.cubin","launch":{"grid":[4],"block":"16x16",)"
      R"("cache_preference":"shared"}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r->evaluate.launch.grid, (Dim3{4, 1, 1}));
  EXPECT_EQ(*r->evaluate.launch.block, (Dim3{16, 16, 1}));
  EXPECT_EQ(*r->evaluate.launch.cache_preference, CachePreference::kShared);
  nlohmann::json back = EvaluateRequestJson(r->evaluate, nullptr);
  EXPECT_EQ(back["launch"]["grid"], nlohmann::json::array({4, 1, 1}));
  auto bad = ParseRequest(R"({"op":"evaluate","code_object_path":"/c","launch":{"grd":[4]}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("grd"), std::string::npos);
}

}  // namespace
}  // namespace kerncap::replay::serve
