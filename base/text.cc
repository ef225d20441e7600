#include "base/text.h"

#include <cstdint>

namespace ibsm {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of the well-formed UTF-8 sequence starting at s[i] and its code point, or 0
// when the byte there starts none (RFC 3629 table 3-7 of Unicode).
size_t Utf8Sequence(std::string_view s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    *cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    *cp = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;  // no overlong forms
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    *cp = c & 0x07;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const uint8_t t = b(i + k);
    if (t < (k == 1 ? lo : 0x80) || t > (k == 1 ? hi : 0xBF)) return 0;
    *cp = (*cp << 6) | (t & 0x3F);
  }
  return n;
}

void AppendHex(std::string& out, uint8_t c) {
  constexpr char kHex[] = "0123456789abcdef";
  out += "\\x";
  out += kHex[c >> 4];
  out += kHex[c & 0xF];
}

}  // namespace

bool IsPrintableAscii(std::string_view bytes) {
  for (char ch : bytes) {
    const auto c = static_cast<uint8_t>(ch);
    if (c < 0x20 || c > 0x7E) return false;
  }
  return true;
}

std::string ValidUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  // Valid bytes are copied a run at a time: pages and answers are mostly valid, and a
  // sequence-by-sequence append was most of the cost of checking a whole page.
  size_t run = 0;
  for (size_t i = 0; i < bytes.size();) {
    if (static_cast<unsigned char>(bytes[i]) < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp;
    size_t n = Utf8Sequence(bytes, i, &cp);
    if (n == 0) {
      out.append(bytes.substr(run, i - run));
      out += kReplacement;
      run = ++i;
    } else {
      i += n;
    }
  }
  out.append(bytes.substr(run));
  return out;
}

std::string EscapeControls(std::string_view bytes) {
  if (IsPrintableAscii(bytes)) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 8);
  for (size_t i = 0; i < bytes.size();) {
    uint32_t cp;
    size_t n = Utf8Sequence(bytes, i, &cp);
    const bool control = n != 0 && (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F));
    if (n == 0 || control) {
      const size_t bad = n == 0 ? 1 : n;
      for (size_t k = 0; k < bad; ++k) AppendHex(out, static_cast<uint8_t>(bytes[i + k]));
      i += bad;
    } else {
      out.append(bytes.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string XmlText(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + 16);
  for (size_t i = 0; i < bytes.size();) {
    uint32_t cp;
    size_t n = Utf8Sequence(bytes, i, &cp);
    if (n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    switch (cp) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if ((cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0xFFFE ||
            cp == 0xFFFF) {
          out += kReplacement;
        } else {
          out.append(bytes.substr(i, n));
        }
    }
    i += n;
  }
  return out;
}

std::string OpenSmPrintable(std::string_view bytes) {
  bytes = bytes.substr(0, bytes.find('\0'));
  bytes = bytes.substr(0, 63);
  std::string out(bytes);
  for (char& ch : out) {
    const auto c = static_cast<uint8_t>(ch);
    if (c < 0x20 || c > 0x7E) ch = ' ';
  }
  return out;
}

}  // namespace ibsm
