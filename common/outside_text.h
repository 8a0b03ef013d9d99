#pragma once
// Bytes that come from outside the harness (arguments, paths, the environment, anything the
// traced program wrote) are bytes, not text: they may not be UTF-8, and JSON can only hold
// UTF-8. Every JSON text the harness writes goes through dump_safe(), which never throws on
// such bytes. The one representation (schema/README.md, "Bytes that are not UTF-8"): valid
// UTF-8 is kept as it is; each byte that is not part of a valid UTF-8 sequence becomes the
// four characters \xHH (upper-case hex), e.g. "caf\xE9". A string so marked can be told
// apart by a reader only where the original could not contain "\x" itself, so the marking
// is for people; where the bytes matter the harness also keeps a count.
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace cudatrace {

// Length of the valid UTF-8 sequence at s[i] (1 to 4), or 0 when the byte there starts none
// (overlong forms, surrogates and code points past U+10FFFF are not valid, as RFC 3629 says).
size_t utf8_sequence_length(std::string_view s, size_t i);

bool is_valid_utf8(std::string_view s);

// `s` unchanged when it is valid UTF-8; otherwise each invalid byte as \xHH.
std::string escape_invalid_utf8(std::string_view s);

// A copy of `j` in which every string value and object key is escape_invalid_utf8()'d.
nlohmann::json utf8_safe(const nlohmann::json& j);

// j.dump(indent) that never throws on bytes that are not UTF-8: the same text when every
// string is valid, else the dump of utf8_safe(j).
std::string dump_safe(const nlohmann::json& j, int indent = -1);

// At most `max_bytes` of `s` for a one-line message, escaped as above, and with the cut said:
// "<first bytes>... [N more bytes]". A path of 100 KB is not echoed whole.
std::string shown(std::string_view s, size_t max_bytes = 200);

// For a terminal: `s` with every control character but newline and tab (C0, DEL, and the C1
// controls U+0080-U+009F, which some terminals obey as escape sequences) and every byte that
// is not valid UTF-8 written as \xHH. A program that names itself "ESC[2J" must not clear the
// root operator's screen, nor make a FAILED run read "ok" with a carriage return.
std::string escape_for_terminal(std::string_view s);

// Makes stderr, the harness's console, pass everything through escape_for_terminal() (a
// cookie stream over file descriptor 2, line-buffered): every line the harness prints
// holds strings from outside, and one filter at the door cannot be forgotten at a call site.
void make_stderr_terminal_safe();

}  // namespace cudatrace
