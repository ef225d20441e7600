// Runs a libFuzzer target without libFuzzer: every file of the given corpus directories, then
// seeded mutations of each (bit flips, byte changes, truncations, insertions, splices of two
// inputs). Built with every *_fuzz.cc in the normal and sanitizer builds, so the suite replays
// the kept corpus and its regression inputs under ASan/UBSan on every run; scripts/fuzz.sh
// does the real coverage-guided fuzzing with clang.
//
//   NAME_replay [--mutations N] [--seed S] DIR_OR_FILE...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace {

std::vector<uint8_t> Slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void Run(const std::vector<uint8_t>& input) {
  // A copy of exactly `size` bytes, so ASan sees any read past the end.
  std::unique_ptr<uint8_t[]> buf(new uint8_t[input.size() ? input.size() : 1]);
  if (!input.empty()) std::memcpy(buf.get(), input.data(), input.size());
  LLVMFuzzerTestOneInput(buf.get(), input.size());
}

std::vector<uint8_t> Mutate(std::vector<uint8_t> v, const std::vector<uint8_t>& other,
                            std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n ? static_cast<size_t>(rng() % n) : 0; };
  int steps = 1 + static_cast<int>(rng() % 4);
  for (int s = 0; s < steps; ++s) {
    switch (rng() % 6) {
      case 0:  // flip a bit
        if (!v.empty()) v[pick(v.size())] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1: {  // an interesting byte
        static constexpr uint8_t kBytes[] = {0x00, 0xff, 0x7f, 0x80, 0x01, '\n', ' ', '#', '"', ':'};
        if (!v.empty()) v[pick(v.size())] = kBytes[rng() % sizeof kBytes];
        break;
      }
      case 2:  // truncate
        v.resize(pick(v.size() + 1));
        break;
      case 3: {  // insert random bytes
        size_t at = pick(v.size() + 1), n = 1 + rng() % 16;
        std::vector<uint8_t> ins(n);
        for (auto& b : ins) b = static_cast<uint8_t>(rng());
        v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), ins.begin(), ins.end());
        break;
      }
      case 4:  // duplicate a slice
        if (!v.empty()) {
          size_t a = pick(v.size()), n = 1 + pick(std::min<size_t>(v.size() - a, 64));
          std::vector<uint8_t> slice(v.begin() + static_cast<std::ptrdiff_t>(a),
                                     v.begin() + static_cast<std::ptrdiff_t>(a + n));
          v.insert(v.begin() + static_cast<std::ptrdiff_t>(pick(v.size() + 1)), slice.begin(), slice.end());
        }
        break;
      default:  // splice with another input
        if (!other.empty()) {
          size_t cut = pick(v.size() + 1), from = pick(other.size());
          v.resize(cut);
          v.insert(v.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
        }
        break;
    }
  }
  if (v.size() > 1 << 16) v.resize(1 << 16);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  uint64_t mutations = 0, seed = 1;
  std::vector<std::filesystem::path> paths;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--mutations" || a == "--seed") && i + 1 < argc) {
      (a == "--seed" ? seed : mutations) = std::strtoull(argv[++i], nullptr, 0);
    } else {
      paths.emplace_back(a);
    }
  }
  std::vector<std::vector<uint8_t>> corpus;
  for (const auto& p : paths) {
    if (std::filesystem::is_directory(p)) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) corpus.push_back(Slurp(f));
    } else if (std::filesystem::is_regular_file(p)) {
      corpus.push_back(Slurp(p));
    } else {
      std::fprintf(stderr, "no such corpus: %s\n", p.c_str());
      return 2;
    }
  }
  corpus.push_back({});  // the empty input, always
  for (const auto& c : corpus) Run(c);
  std::mt19937_64 rng(seed);
  for (uint64_t m = 0; m < mutations; ++m) {
    const auto& base = corpus[m % corpus.size()];
    const auto& other = corpus[rng() % corpus.size()];
    Run(Mutate(base, other, rng));
  }
  std::printf("%zu corpus inputs and %llu mutations ran without a finding\n", corpus.size(),
              static_cast<unsigned long long>(mutations));
  return 0;
}
