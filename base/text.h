// Text that came from the fabric, rendered for each kind of reader. A NodeDescription is 64
// bytes a host's root chooses (IBA 14.2.5.2: "UTF-8 encoded" by convention, never checked):
// not UTF-8, control and escape bytes, markup, quotes, no terminating NUL. The fabric model
// keeps those bytes as they came (the SA hands them back to clients unchanged, as OpenSM
// does); every place that shows them to someone goes through one of these.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace ibsm {

// `bytes` with every byte that is not part of a well-formed UTF-8 sequence (RFC 3629:
// overlong forms, surrogates and code points past U+10FFFF included) replaced by U+FFFD.
// What JSON, SQLite text readers and browsers can take.
std::string ValidUtf8(std::string_view bytes);

// For logs and terminals: well-formed printable UTF-8 kept; C0 controls, DEL, C1 controls
// (U+0080..U+009F) and bytes that are not well-formed UTF-8 written as \xNN, so a byte can
// neither forge a line nor drive the terminal, and the original bytes stay readable.
std::string EscapeControls(std::string_view bytes);

// For XML text and attribute values (SVG): ValidUtf8, then & < > " ' as entities, and
// characters XML 1.0 does not allow (C0 controls but TAB/LF/CR, U+FFFE, U+FFFF) as U+FFFD.
std::string XmlText(std::string_view bytes);

// What OpenSM prints for a NodeDescription in its logs and dump files (its print_desc,
// libibnetdisc's clean_nodedesc): the bytes up to the first NUL, at most 63 of them, with
// every byte outside printable ASCII (0x20..0x7e) as a space.
std::string OpenSmPrintable(std::string_view bytes);

// True when every byte is printable ASCII (0x20..0x7e): nothing above needs to change it.
bool IsPrintableAscii(std::string_view bytes);

}  // namespace ibsm
