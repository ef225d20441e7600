// Every key OpenSM 3.3.23 knows (the 160 that `opensm -c` writes), and what ibsm does with
// each: it acts, ibsm behaves as one fixed value of it, or it tunes a feature ibsm does not
// have and no value of it changes what ibsm does. A key set in a config file to a value ibsm
// does not honour is named at start (CONF-030) and counted, so no key is silently ignored.
// README.md's "opensm.conf keys" table is this table (a test keeps them equal).
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace ibsm::conf {

enum class KeySupport {
  kActs,   // the value changes what ibsm does (a typed option in OptionTable())
  kFixed,  // ibsm behaves as `honoured`; any other value is not honoured
  kMoot,   // tunes a feature ibsm does not have, which another key or flag would have to
           // ask for (and that is named there); no value of this key changes anything
};

struct OpenSmKey {
  std::string_view name;
  std::string_view opensm_default;  // as `opensm -c` (3.3.23) writes it
  KeySupport support;
  // kFixed: the values ibsm behaves as, '|'-separated ("FALSE", "(null)", "0"); booleans
  // and numbers compare by value (TRUE = 1, 0x08 = 8); "bits:0x03" takes any number with
  // those bits set. Empty: no value is honoured. kActs: when not empty, the values that act
  // fully (others act partly and are named).
  std::string_view honoured;
  std::string_view note;  // what ibsm does, for the warning, `ibsmd -c` and the README
};

// All 160 keys, in `opensm -c` order.
std::span<const OpenSmKey> OpenSmKeys();
// Null when OpenSM 3.3.23 does not know `name`.
const OpenSmKey* FindOpenSmKey(std::string_view name);
// True when ibsm does what `value` of `key` asks for.
bool Honoured(const OpenSmKey& key, std::string_view value);
// "qos TRUE is not honoured by ibsm (it behaves as FALSE): no QoS manager: ...", the
// CONF-030 text (value printable whatever its bytes).
std::string NotHonouredText(const OpenSmKey& key, std::string_view value);
// "acts", "acts partly", "behaves as FALSE", "no effect (...)": the README's wording.
std::string SupportText(const OpenSmKey& key);
// "0x03 or 0x43": a `honoured` list as text.
std::string ValuesText(std::string_view honoured);

}  // namespace ibsm::conf
