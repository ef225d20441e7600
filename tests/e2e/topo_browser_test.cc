// `ibsmctl topo --format svg` (and html) of a 3-tier k=8 fat tree, opened in a real browser
// (Debian's chromium, headless), so that the browser parses the SVG without an error, and its
// screenshot shows every switch and every host - counted as separate boxes of their fill
// colours in the decoded PNG, not guessed from the file. Skipped, saying so, where chromium
// is not installed (scripts/setup.sh installs it).
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>

#include <gtest/gtest.h>

#include "tests/e2e/ibsim_harness.h"

namespace ibsm::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr char kChromium[] = "/usr/bin/chromium";

// Decodes an 8-bit RGB or RGBA PNG (what chromium writes) and prints, for each colour given
// as rrggbb, how many separate 4-connected regions of that exact colour the image holds.
constexpr char kCountBoxes[] = R"(import struct, sys, zlib
data = open(sys.argv[1], 'rb').read()
assert data[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
at, idat = 8, b''
while at < len(data):
    n, kind = struct.unpack('>I4s', data[at:at + 8])
    body = data[at + 8:at + 8 + n]
    at += 12 + n
    if kind == b'IHDR':
        w, h, depth, ctype, _, _, interlace = struct.unpack('>IIBBBBB', body)
    elif kind == b'IDAT':
        idat += body
assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
bpp = 3 if ctype == 2 else 4
raw = zlib.decompress(idat)
stride = w * bpp
rows, prev, at = [], bytearray(stride), 0
for y in range(h):
    f, line = raw[at], bytearray(raw[at + 1:at + 1 + stride])
    at += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b = prev[x]
        c = prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(bytes(line))
    prev = line
print('size', w, h)
for hexcolour in sys.argv[2:]:
    want = bytes.fromhex(hexcolour)
    seen = set()
    regions = 0
    for y in range(h):
        for x in range(w):
            if (x, y) in seen or rows[y][x * bpp:x * bpp + 3] != want:
                continue
            regions += 1
            stack = [(x, y)]
            seen.add((x, y))
            while stack:
                px, py = stack.pop()
                for nx, ny in ((px + 1, py), (px - 1, py), (px, py + 1), (px, py - 1)):
                    if 0 <= nx < w and 0 <= ny < h and (nx, ny) not in seen and \
                       rows[ny][nx * bpp:nx * bpp + 3] == want:
                        seen.add((nx, ny))
                        stack.append((nx, ny))
    print(hexcolour, regions)
)";

TEST(TopoBrowserTest, ChromiumDrawsEverySwitchAndHostOfA3TierFatTree) {
  if (!fs::exists(kChromium)) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh)";
  fs::path dir = fs::temp_directory_path() / ("ibsm-topo-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string sock = (dir / "ibsmd.sock").string();
  const std::string log = (dir / "ibsmd.log").string();
  std::ofstream(dir / "ibsmd.conf") << "log_file " << log << "\n"
                                    << "dump_files_dir " << dir.string() << "\n"
                                    << "state_db_file " << (dir / "state.db").string() << "\n"
                                    << "guid2lid_file " << (dir / "none").string() << "\n"
                                    << "control_socket " << sock << "\n"
                                    << "routing_engine ftree\n"
                                    << "sweep_interval 0\n";
  auto daemon = ChildProcess::Start(
      {Bin("ibsmd"), "-F", (dir / "ibsmd.conf").string(), "--sim",
       std::string(IBSM_SOURCE_DIR) + "/sim/topologies/ftree3-k8.net"},
      dir.string(), {});
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  ASSERT_TRUE(WaitForCount(log, "SUBNET UP", 1)) << ReadFile(log);
  auto svg = RunCommand({Bin("ibsmctl"), "--socket", sock, "topo", "--format", "svg"}, 60s,
                        dir.string());
  kill(daemon->pid(), SIGTERM);
  ASSERT_TRUE(daemon->Wait(30s).ok());
  ASSERT_TRUE(svg.ok());
  ASSERT_EQ(svg->exit_code, 0) << Describe(*svg);
  const fs::path file = dir / "fabric.svg";
  std::ofstream(file) << svg->out;

  // The picture scales (width 100%, a viewBox); a window of the viewBox's size draws it 1:1.
  std::smatch size;
  const std::regex root(R"re(<svg [^>]*viewBox="0 0 (\d+) (\d+)" width="100%")re");
  ASSERT_TRUE(std::regex_search(svg->out, size, root)) << svg->out.substr(0, 300);
  const std::string window = std::string(size[1]) + "," + std::string(size[2]);
  const std::vector<std::string> browser = {kChromium, "--headless", "--no-sandbox", "--disable-gpu",
                                            "--hide-scrollbars",
                                            "--user-data-dir=" + (dir / "profile").string()};
  const std::vector<std::string> env = {"HOME=" + dir.string(), "PATH=/usr/bin:/bin"};

  // The document as the browser parsed it: an SVG root and no XML parser error.
  auto dom_args = browser;
  dom_args.insert(dom_args.end(), {"--dump-dom", "file://" + file.string()});
  auto dom = RunCommand(dom_args, 120s, dir.string(), env);
  ASSERT_TRUE(dom.ok());
  ASSERT_EQ(dom->exit_code, 0) << Describe(*dom);
  EXPECT_NE(dom->out.find("<svg"), std::string::npos) << dom->out.substr(0, 500);
  EXPECT_EQ(dom->out.find("parsererror"), std::string::npos) << dom->out.substr(0, 2000);

  auto shot_args = browser;
  shot_args.insert(shot_args.end(), {"--window-size=" + window,
                                     "--screenshot=" + (dir / "fabric.png").string(),
                                     "file://" + file.string()});
  auto shot = RunCommand(shot_args, 120s, dir.string(), env);
  ASSERT_TRUE(shot.ok());
  ASSERT_EQ(shot->exit_code, 0) << Describe(*shot);
  ASSERT_TRUE(fs::exists(dir / "fabric.png")) << Describe(*shot);

  // Switch boxes are #4a78b5, host boxes #f2c14e (tools/topology_style.h); the legend shows
  // one of each.
  std::ofstream(dir / "count_boxes.py") << kCountBoxes;
  auto count = RunCommand({"python3", (dir / "count_boxes.py").string(),
                           (dir / "fabric.png").string(), "4a78b5", "f2c14e"},
                          300s, dir.string());
  ASSERT_TRUE(count.ok());
  ASSERT_EQ(count->exit_code, 0) << Describe(*count);
  EXPECT_NE(count->out.find("size " + std::string(size[1]) + " " + std::string(size[2])),
            std::string::npos)
      << count->out;
  EXPECT_NE(count->out.find("4a78b5 81\n"), std::string::npos)
      << "80 switches and the legend's drawn: " << count->out;
  EXPECT_NE(count->out.find("f2c14e 129\n"), std::string::npos)
      << "128 hosts and the legend's drawn: " << count->out;
  // Every switch named on its box, not only in a tooltip.
  for (const char* name : {"core-001", "pod08-spine-04", "pod01-leaf-01"})
    EXPECT_NE(dom->out.find(std::string(">") + name + "</text>"), std::string::npos) << name;
  fs::remove_all(dir);
}

// `ibsmctl topo --format html` of the same fabric: the page loads in chromium with no script
// error, its pan and zoom move the picture (the page's #selftest), the picture, its legend
// and the health and links tables are in the document, and a screenshot decodes and shows
// switch boxes and the tables' header cells.
TEST(TopoBrowserTest, ChromiumLoadsTheHtmlPageWithItsTablesAndNoScriptError) {
  if (!fs::exists(kChromium)) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh)";
  fs::path dir = fs::temp_directory_path() / ("ibsm-topo-html-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string sock = (dir / "ibsmd.sock").string();
  const std::string log = (dir / "ibsmd.log").string();
  std::ofstream(dir / "ibsmd.conf") << "log_file " << log << "\n"
                                    << "dump_files_dir " << dir.string() << "\n"
                                    << "state_db_file " << (dir / "state.db").string() << "\n"
                                    << "guid2lid_file " << (dir / "none").string() << "\n"
                                    << "control_socket " << sock << "\n"
                                    << "routing_engine ftree\n"
                                    << "sweep_interval 0\n";
  auto daemon = ChildProcess::Start(
      {Bin("ibsmd"), "-F", (dir / "ibsmd.conf").string(), "--sim",
       std::string(IBSM_SOURCE_DIR) + "/sim/topologies/ftree3-k8.net"},
      dir.string(), {});
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  ASSERT_TRUE(WaitForCount(log, "SUBNET UP", 1)) << ReadFile(log);
  auto html = RunCommand({Bin("ibsmctl"), "--socket", sock, "topo", "--format", "html"}, 60s,
                         dir.string());
  kill(daemon->pid(), SIGTERM);
  ASSERT_TRUE(daemon->Wait(30s).ok());
  ASSERT_TRUE(html.ok());
  ASSERT_EQ(html->exit_code, 0) << Describe(*html);
  const fs::path file = dir / "fabric.html";
  std::ofstream(file) << html->out;
  const std::vector<std::string> browser = {
      kChromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
      "--enable-logging=stderr", "--v=0", "--user-data-dir=" + (dir / "profile").string()};
  const std::vector<std::string> env = {"HOME=" + dir.string(), "PATH=/usr/bin:/bin"};

  auto dom_args = browser;
  dom_args.insert(dom_args.end(), {"--dump-dom", "file://" + file.string() + "#selftest"});
  auto dom = RunCommand(dom_args, 120s, dir.string(), env);
  ASSERT_TRUE(dom.ok());
  ASSERT_EQ(dom->exit_code, 0) << Describe(*dom);
  EXPECT_EQ(dom->out.find(" data-script-error=\""), std::string::npos) << dom->out.substr(0, 2000);
  EXPECT_EQ(dom->err.find("Uncaught"), std::string::npos) << dom->err;
  EXPECT_EQ(dom->err.find(":ERROR:CONSOLE"), std::string::npos) << dom->err;
  EXPECT_NE(dom->out.find("data-ready=\"yes\""), std::string::npos) << "the script ran";
  EXPECT_NE(dom->out.find("data-selftest=\"ok\""), std::string::npos) << "pan and zoom work";
  for (const char* element : {"<svg", "<g id=\"legend\"", "<table id=\"health-table\">",
                              "<table id=\"links-table\">", "id=\"zoom-in\"", ">core-001</text>"})
    EXPECT_NE(dom->out.find(element), std::string::npos) << element;

  auto shot_args = browser;
  shot_args.insert(shot_args.end(), {"--window-size=1600,900",
                                     "--screenshot=" + (dir / "page.png").string(),
                                     "file://" + file.string()});
  auto shot = RunCommand(shot_args, 120s, dir.string(), env);
  ASSERT_TRUE(shot.ok());
  ASSERT_EQ(shot->exit_code, 0) << Describe(*shot);
  ASSERT_TRUE(fs::exists(dir / "page.png")) << Describe(*shot);
  std::ofstream(dir / "count_boxes.py") << kCountBoxes;
  // Switch boxes #4a78b5; table header cells #eeeeee (tools/topology_html.cc).
  auto count = RunCommand({"python3", (dir / "count_boxes.py").string(),
                           (dir / "page.png").string(), "4a78b5", "eeeeee"},
                          300s, dir.string());
  ASSERT_TRUE(count.ok());
  ASSERT_EQ(count->exit_code, 0) << Describe(*count);
  EXPECT_NE(count->out.find("size 1600 900"), std::string::npos) << count->out;
  std::smatch n;
  ASSERT_TRUE(std::regex_search(count->out, n, std::regex("4a78b5 (\\d+)"))) << count->out;
  EXPECT_GE(std::stoi(n[1]), 20) << "switch boxes on the page: " << count->out;
  ASSERT_TRUE(std::regex_search(count->out, n, std::regex("eeeeee (\\d+)"))) << count->out;
  EXPECT_GE(std::stoi(n[1]), 10) << "table header cells on the page: " << count->out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ibsm::test
