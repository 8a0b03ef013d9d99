// Bytes from outside as JSON text (common/outside_text.h) and bounded reading of the
// program's text files (common/bounded_lines.h).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "common/bounded_lines.h"
#include "common/outside_text.h"
#include "test_support.h"

using namespace cudatrace;

TEST(OutsideText, ValidUtf8IsKeptAndInvalidBytesAreMarked) {
  EXPECT_EQ(escape_invalid_utf8("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(escape_invalid_utf8("caf\xe9"), "caf\\xE9");
  EXPECT_EQ(escape_invalid_utf8(std::string("a\0b", 3)), std::string("a\0b", 3));
  EXPECT_EQ(escape_invalid_utf8("\xc0\xaf"), "\\xC0\\xAF") << "overlong";
  EXPECT_EQ(escape_invalid_utf8("\xed\xa0\x80"), "\\xED\\xA0\\x80") << "a surrogate";
  EXPECT_EQ(escape_invalid_utf8("\xf4\x90\x80\x80"), "\\xF4\\x90\\x80\\x80") << "past U+10FFFF";
  EXPECT_EQ(escape_invalid_utf8("\xf0\x9f\x98\x80\xe2\x82"), "\xf0\x9f\x98\x80\\xE2\\x82") << "cut short at the end";
}

TEST(OutsideText, DumpNeverThrowsOnBytes) {
  nlohmann::json j = {{"argv", {"/bin/echo", "caf\xe9"}}, {"k\xff", 1}};
  EXPECT_THROW((void)j.dump(), nlohmann::json::type_error);
  const std::string text = dump_safe(j);
  EXPECT_EQ(text, R"({"argv":["/bin/echo","caf\\xE9"],"k\\xFF":1})");
  EXPECT_EQ(nlohmann::json::parse(text)["argv"][1], "caf\\xE9");
  const nlohmann::json plain = {{"a", "b"}};
  EXPECT_EQ(dump_safe(plain, 2), plain.dump(2));
}

TEST(OutsideText, ShownCutsLongValuesAndSaysSo) {
  EXPECT_EQ(shown("short"), "short");
  EXPECT_EQ(shown(std::string(1000, 'a'), 10), "aaaaaaaaaa... [990 more bytes]");
  EXPECT_EQ(shown("ab\xc3\xa9z", 3), "ab... [3 more bytes]") << "never inside a UTF-8 sequence";
}

TEST(ParseNumbers, WholeNumbersOnlyNeverAThrow) {
  EXPECT_EQ(parse_int64("42"), 42);
  EXPECT_EQ(parse_int64("-7"), -7);
  EXPECT_FALSE(parse_int64("99999999999999999999999"));
  EXPECT_FALSE(parse_int64("4x"));
  EXPECT_FALSE(parse_int64(""));
  EXPECT_FALSE(parse_int64("+4"));
  EXPECT_EQ(parse_uint64("0x10", 16), 16u);
  EXPECT_EQ(parse_uint64("ff", 16), 255u);
  EXPECT_FALSE(parse_uint64("zz", 16));
  EXPECT_FALSE(parse_uint64("-1"));
}

namespace {
std::filesystem::path write_file(const std::string& content) {
  const auto p = testsupport::temp_dir("bounded") / "f";
  std::ofstream(p, std::ios::binary) << content;
  return p;
}
}  // namespace

TEST(BoundedLines, LinesWithinTheBounds) {
  BoundedLines in(write_file("one\ntwo\n\nlast"), 1000);
  ASSERT_TRUE(in.is_open());
  std::string l;
  std::vector<std::string> got;
  while (in.next(l)) got.push_back(l);
  EXPECT_EQ(got, (std::vector<std::string>{"one", "two", "", "last"}));
  EXPECT_EQ(in.unread_bytes(), 0u);
  EXPECT_EQ(in.line_number(), 4);
}

TEST(BoundedLines, LongLineIsCutAndTheNextOneRead) {
  BoundedLines in(write_file(std::string(100, 'x') + "\nnext\n"), 1000, nullptr, 10);
  std::string l;
  ASSERT_TRUE(in.next(l));
  EXPECT_EQ(l, std::string(10, 'x'));
  EXPECT_TRUE(in.line_cut());
  ASSERT_TRUE(in.next(l));
  EXPECT_EQ(l, "next");
  EXPECT_FALSE(in.line_cut());
  EXPECT_EQ(in.lines_cut(), 1);
}

TEST(BoundedLines, PerFileAndPerRunBoundsAreCounted) {
  const auto f = write_file("aaaa\nbbbb\ncccc\n");  // 15 bytes
  {
    BoundedLines in(f, 10);
    std::string l;
    while (in.next(l)) {
    }
    EXPECT_EQ(in.bytes_read(), 10u);
    EXPECT_EQ(in.unread_bytes(), 5u);
    EXPECT_STREQ(in.bound_hit(), "per file");
  }
  ReadBudget budget(20);
  {
    BoundedLines in(f, 100, &budget);
    std::string l;
    while (in.next(l)) {
    }
    EXPECT_EQ(in.unread_bytes(), 0u);
  }
  BoundedLines second(f, 100, &budget);
  std::string l;
  while (second.next(l)) {
  }
  EXPECT_EQ(second.bytes_read(), 5u);
  EXPECT_EQ(second.unread_bytes(), 10u);
  EXPECT_STREQ(second.bound_hit(), "per run");
  EXPECT_EQ(budget.left, 0u);
}

TEST(BoundedLines, FifoAndLinkAreRefused) {
  const auto dir = testsupport::temp_dir("bounded-fifo");
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
  BoundedLines fifo(dir / "fifo", 100);
  EXPECT_FALSE(fifo.is_open());
  EXPECT_EQ(fifo.why(), "not a regular file");
  std::filesystem::create_symlink("/etc/hostname", dir / "link");
  BoundedLines link(dir / "link", 100);
  EXPECT_FALSE(link.is_open());
}
