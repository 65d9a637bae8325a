// kcsim: loads a (synthetic) model, tokenizes a prompt and runs the decoder.
//
//   kcsim [--layers=24] [--tokens=512] [--check-layer=L]
//
// --check-layer=L stops after layer L's attention scores and checks them
// against a host computation (exit 0 when they match, 1 otherwise): the
// "run the application to the kernel and check its result" step of the
// traditional edit loop. Without it the whole forward pass runs and a
// checksum of the final activations is printed.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kcsim/check.h"
#include "kcsim/model.h"

namespace {

int g_check_layer = -1;
bool g_check_ok = false;

int IntArg(int argc, char** argv, const char* name, int def) {
  const size_t n = std::strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') return std::atoi(argv[i] + n + 1);
  }
  return def;
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<float> Download(const kcsim::Buffer& b) {
  std::vector<float> h(static_cast<size_t>(b.numel()));
  KCSIM_CHECK(cudaMemcpy(h.data(), b.data, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

// Host reference of the causal attention scores of every head.
bool CheckScores(int layer, const kcsim::Activations& a, const kcsim::ModelConfig& c) {
  if (layer != g_check_layer) return true;
  KCSIM_CHECK(cudaDeviceSynchronize());
  const std::vector<float> q = Download(a.q), k = Download(a.k), s = Download(a.scores);
  const int hd = c.dim / c.heads, t = c.tokens;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  double worst = 0;
  long bad = 0;
  for (int h = 0; h < c.heads; ++h) {
    for (int i = 0; i < t; ++i) {
      for (int j = 0; j < t; ++j) {
        const float got = s[(static_cast<size_t>(h) * t + i) * t + j];
        if (j > i) {
          if (!(std::isinf(got) && got < 0)) ++bad;
          continue;
        }
        double ref = 0;
        for (int d = 0; d < hd; ++d) {
          ref += static_cast<double>(q[static_cast<size_t>(i) * c.dim + h * hd + d]) *
                 k[static_cast<size_t>(j) * c.dim + h * hd + d];
        }
        ref *= scale;
        const double err = std::fabs(got - ref) / (1.0 + std::fabs(ref));
        worst = std::max(worst, err);
        if (err > 1e-3) ++bad;
      }
    }
  }
  g_check_ok = bad == 0;
  std::printf("layer %d attention scores: %s (%ld mismatches, worst relative error %.2e)\n",
              layer, g_check_ok ? "OK" : "WRONG", bad, worst);
  return false;  // stop: the kernel under work has been checked
}

}  // namespace

int main(int argc, char** argv) {
  kcsim::ModelConfig config;
  config.layers = IntArg(argc, argv, "--layers", config.layers);
  config.tokens = IntArg(argc, argv, "--tokens", config.tokens);
  g_check_layer = IntArg(argc, argv, "--check-layer", -1);
  const auto t0 = std::chrono::steady_clock::now();
  KCSIM_CHECK(cudaSetDevice(0));
  std::vector<int32_t> prompt = kcsim::PreparePrompt(config);
  std::printf("prompt: %zu tokens (%.2f s)\n", prompt.size(), Seconds(t0));
  kcsim::Model model = kcsim::LoadModel(config);
  std::printf("model: %d layers, dim %d (%.2f s)\n", config.layers, config.dim, Seconds(t0));
  kcsim::Activations act = kcsim::AllocateActivations(config);
  int32_t* tokens = nullptr;
  KCSIM_CHECK(cudaMalloc(&tokens, prompt.size() * sizeof(int32_t)));
  KCSIM_CHECK(cudaMemcpy(tokens, prompt.data(), prompt.size() * sizeof(int32_t),
                         cudaMemcpyHostToDevice));
  cudaStream_t s;
  KCSIM_CHECK(cudaStreamCreate(&s));
  const int last = g_check_layer >= 0 ? g_check_layer : config.layers - 1;
  const bool finished = kcsim::Forward(model, tokens, act, last, &CheckScores, s);
  KCSIM_CHECK(cudaStreamSynchronize(s));
  if (!finished) {
    std::printf("stopped after the check (%.2f s)\n", Seconds(t0));
    return g_check_ok ? 0 : 1;
  }
  const std::vector<float> out = Download(act.x);
  double sum = 0;
  for (float v : out) sum += v;
  std::printf("forward pass done: checksum %.6e (%.2f s)\n", sum, Seconds(t0));
  return 0;
}
