#include "base/text.h"

#include <gtest/gtest.h>

#include <string>

namespace ibsm {
namespace {

// Every one of the 64 byte values a NodeDescription can hold at each position.
std::string AllBytes() {
  std::string s;
  for (int c = 0; c < 256; ++c) s += static_cast<char>(c);
  return s;
}

bool IsValidUtf8(const std::string& s) { return ValidUtf8(s) == s; }

TEST(TextTest, ValidUtf8KeepsWellFormedTextAndReplacesEveryOtherByte) {
  EXPECT_EQ(ValidUtf8("node-0001 HCA-1"), "node-0001 HCA-1");
  EXPECT_EQ(ValidUtf8("gr\xC3\xBC\xC3\x9F"), "gr\xC3\xBC\xC3\x9F");          // grüß
  EXPECT_EQ(ValidUtf8("caf\xE9"), "caf\xEF\xBF\xBD");                       // Latin-1 é
  EXPECT_EQ(ValidUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");             // overlong '/'
  EXPECT_EQ(ValidUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(ValidUtf8("\xF4\x90\x80\x80").substr(0, 3), "\xEF\xBF\xBD");   // past U+10FFFF
  EXPECT_EQ(ValidUtf8("\xE2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");             // cut short
  EXPECT_EQ(ValidUtf8("a\xFF\xC3\xBC-\x80z"), "a\xEF\xBF\xBD\xC3\xBC-\xEF\xBF\xBDz");  // runs between
  EXPECT_TRUE(IsValidUtf8(ValidUtf8(AllBytes())));
}

TEST(TextTest, EscapeControlsLeavesNoByteThatForgesALineOrDrivesATerminal) {
  EXPECT_EQ(EscapeControls("leaf-001"), "leaf-001");
  EXPECT_EQ(EscapeControls("a\nSUBNET UP"), "a\\x0aSUBNET UP");
  EXPECT_EQ(EscapeControls("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(EscapeControls("caf\xE9"), "caf\\xe9");
  EXPECT_EQ(EscapeControls("\xC2\x9B"), "\\xc2\\x9b");  // C1 CSI
  EXPECT_EQ(EscapeControls("gr\xC3\xBC"), "gr\xC3\xBC");
  const std::string out = EscapeControls(AllBytes());
  EXPECT_TRUE(IsValidUtf8(out));
  for (char c : out) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f);
}

TEST(TextTest, XmlTextIsWellFormedXmlWhateverTheBytes) {
  EXPECT_EQ(XmlText("<script>&\"'"), "&lt;script&gt;&amp;&quot;&apos;");
  EXPECT_EQ(XmlText("a\x01" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(XmlText("a\tb\n"), "a\tb\n");
  const std::string out = XmlText(AllBytes());
  EXPECT_TRUE(IsValidUtf8(out));
  for (char c : out) {
    const auto u = static_cast<unsigned char>(c);
    EXPECT_FALSE(u < 0x20 && u != '\t' && u != '\n' && u != '\r');
    EXPECT_NE(c, '<');
    EXPECT_NE(c, '"');
  }
}

TEST(TextTest, OpenSmPrintableIsOpenSmsPrintDesc) {
  EXPECT_EQ(OpenSmPrintable("node-0001 HCA-1"), "node-0001 HCA-1");
  EXPECT_EQ(OpenSmPrintable("a\tb\xE9" "c"), "a b c");
  EXPECT_EQ(OpenSmPrintable(std::string("ab\0cd", 5)), "ab");
  EXPECT_EQ(OpenSmPrintable(std::string(64, 'x')), std::string(63, 'x'));
}

}  // namespace
}  // namespace ibsm
