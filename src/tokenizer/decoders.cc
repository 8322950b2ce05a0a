#include "tokenizer/decoders.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace ringlm::tok {

namespace {

const std::string kReplacementUtf8 = "\xEF\xBF\xBD";

// Appends the lossy UTF-8 decoding of bytes[0, n) to out; returns how many bytes were consumed.
// With `final` false an incomplete (so far valid) sequence at the end is left unconsumed.
size_t lossy_utf8(std::string_view bytes, bool final, std::string& out) {
  size_t i = 0;
  while (i < bytes.size()) {
    size_t bad = 0;
    const size_t l = valid_seq_len(bytes, i, &bad);
    if (l > 0) {
      out.append(bytes.substr(i, l));
      i += l;
      continue;
    }
    const auto lead = static_cast<unsigned char>(bytes[i]);
    if (!final && i + bad == bytes.size() && lead >= 0xC2 && lead <= 0xF4 && utf8_len(lead) > bad) {
      break;  // might still be completed by the next token
    }
    out += kReplacementUtf8;
    i += bad;
  }
  return i;
}

class ReplaceStage final : public DecoderStage {
 public:
  ReplaceStage(Pattern p, std::string content, bool fused)
      : p_(std::move(p)), content_(std::move(content)), fused_(fused) {}
  std::unique_ptr<DecoderStage> clone() const override {
    return std::make_unique<ReplaceStage>(p_, content_, fused_);
  }
  void push(std::string&& s, std::vector<std::string>& out) override {
    if (!fused_) {
      out.push_back(replace_all(p_, s, content_));
      return;
    }
    pending_ += s;
    const std::string& pat = p_.literal;
    std::string emit;
    size_t pos = 0, last_end = 0;
    while ((pos = pending_.find(pat, pos)) != std::string::npos) {
      emit.append(pending_, last_end, pos - last_end);
      emit += content_;
      pos += pat.size();
      last_end = pos;
    }
    // Hold back the longest tail that is a proper prefix of the pattern.
    size_t hold = std::min(pat.size() - 1, pending_.size() - last_end);
    while (hold > 0 && pending_.compare(pending_.size() - hold, hold, pat, 0, hold) != 0) --hold;
    emit.append(pending_, last_end, pending_.size() - hold - last_end);
    pending_.erase(0, pending_.size() - hold);
    if (!emit.empty()) out.push_back(std::move(emit));
  }
  void flush(std::vector<std::string>& out) override {
    if (!pending_.empty()) out.push_back(std::move(pending_));
    pending_.clear();
  }

 private:
  Pattern p_;
  std::string content_;
  bool fused_;
  std::string pending_;
};

class ByteFallbackStage final : public DecoderStage {
 public:
  std::unique_ptr<DecoderStage> clone() const override {
    return std::make_unique<ByteFallbackStage>();
  }
  void push(std::string&& s, std::vector<std::string>& out) override {
    int byte = -1;
    if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>') byte = parse_hex(s[3], s[4]);
    if (byte >= 0) {
      run_.push_back(static_cast<char>(byte));
      return;
    }
    flush(out);
    out.push_back(std::move(s));
  }
  void flush(std::vector<std::string>& out) override {
    if (run_.empty()) return;
    if (is_valid_utf8(run_)) {
      out.push_back(std::move(run_));
    } else {
      for (size_t k = 0; k < run_.size(); ++k) out.push_back(kReplacementUtf8);
    }
    run_.clear();
  }

 private:
  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  // Rust's u8::from_str_radix(.., 16) on two characters (it also accepts a leading '+').
  static int parse_hex(char a, char b) {
    if (a == '+') return hex(b);
    const int hi = hex(a), lo = hex(b);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }
  std::string run_;
};

class FuseStage final : public DecoderStage {
 public:
  std::unique_ptr<DecoderStage> clone() const override { return std::make_unique<FuseStage>(); }
  void push(std::string&& s, std::vector<std::string>& out) override {
    out.push_back(std::move(s));
  }
  void flush(std::vector<std::string>&) override {}
};

class StripStage final : public DecoderStage {
 public:
  StripStage(char32_t c, size_t start, size_t stop, bool fused)
      : c_(c), start_(start), stop_(stop), fused_(fused) {}
  std::unique_ptr<DecoderStage> clone() const override {
    return std::make_unique<StripStage>(c_, start_, stop_, fused_);
  }
  void push(std::string&& s, std::vector<std::string>& out) override {
    std::u32string cps = decode(s);
    if (!fused_) {
      size_t b = 0, e = cps.size();
      while (b < start_ && b < cps.size() && cps[b] == c_) ++b;
      for (size_t k = 0; k < stop_ && e > b && cps[e - 1] == c_; ++k) --e;
      out.push_back(encode(cps, b, e));
      return;
    }
    size_t b = 0;
    while (!started_ && b < cps.size()) {
      if (stripped_ < start_ && cps[b] == c_) {
        ++stripped_, ++b;
      } else {
        started_ = true;
      }
    }
    held_.append(cps, b, std::u32string::npos);
    size_t trailing = 0;
    while (trailing < held_.size() && trailing < stop_ && held_[held_.size() - 1 - trailing] == c_)
      ++trailing;
    if (held_.size() > trailing) {
      out.push_back(encode(held_, 0, held_.size() - trailing));
      held_.erase(0, held_.size() - trailing);
    }
  }
  void flush(std::vector<std::string>&) override { held_.clear(); }  // trailing chars stripped

 private:
  static std::u32string decode(const std::string& s) {
    std::u32string r;
    size_t i = 0;
    while (i < s.size()) r.push_back(next_cp(s, i));
    return r;
  }
  static std::string encode(const std::u32string& cps, size_t b, size_t e) {
    std::string r;
    for (size_t k = b; k < e; ++k) append_utf8(r, cps[k]);
    return r;
  }
  char32_t c_;
  size_t start_, stop_;
  bool fused_;
  size_t stripped_ = 0;
  bool started_ = false;
  std::u32string held_;
};

class MetaspaceStage final : public DecoderStage {
 public:
  MetaspaceStage(std::string rep, bool drop_first, bool fused)
      : rep_(std::move(rep)), drop_first_(drop_first), fused_(fused) {}
  std::unique_ptr<DecoderStage> clone() const override {
    return std::make_unique<MetaspaceStage>(rep_, drop_first_, fused_);
  }
  void push(std::string&& s, std::vector<std::string>& out) override {
    const bool first = fused_ || index_ == 0;
    ++index_;
    std::string r;
    size_t pos = 0, last = 0;
    while ((pos = s.find(rep_, pos)) != std::string::npos) {
      r.append(s, last, pos - last);
      if (!(first && drop_first_)) r += ' ';
      pos += rep_.size();
      last = pos;
    }
    r.append(s, last, std::string::npos);
    out.push_back(std::move(r));
  }
  void flush(std::vector<std::string>&) override {}

 private:
  std::string rep_;
  bool drop_first_, fused_;
  size_t index_ = 0;
};

class ByteLevelStage final : public DecoderStage {
 public:
  std::unique_ptr<DecoderStage> clone() const override {
    return std::make_unique<ByteLevelStage>();
  }
  void push(std::string&& s, std::vector<std::string>& out) override {
    const auto& t = byte_level_table();
    std::string bytes;
    bytes.reserve(s.size());
    size_t i = 0;
    bool all = true;
    while (i < s.size()) {
      const char32_t c = next_cp(s, i);
      if (c >= 512 || t.cp_to_byte[c] < 0) {
        all = false;
        break;
      }
      bytes.push_back(static_cast<char>(t.cp_to_byte[c]));
    }
    pending_ += all ? bytes : s;  // tokens outside the byte alphabet pass through as raw bytes
    std::string text;
    const size_t used = lossy_utf8(pending_, false, text);
    pending_.erase(0, used);
    if (!text.empty()) out.push_back(std::move(text));
  }
  void flush(std::vector<std::string>& out) override {
    std::string text;
    lossy_utf8(pending_, true, text);
    pending_.clear();
    if (!text.empty()) out.push_back(std::move(text));
  }

 private:
  std::string pending_;
};

class JoinSpacesStage final : public DecoderStage {
 public:
  std::unique_ptr<DecoderStage> clone() const override {
    return std::make_unique<JoinSpacesStage>();
  }
  void push(std::string&& s, std::vector<std::string>& out) override {
    if (!first_) out.push_back(" ");
    first_ = false;
    out.push_back(std::move(s));
  }
  void flush(std::vector<std::string>&) override {}

 private:
  bool first_ = true;
};

void parse_into(const json& j, const std::string& where, bool& fused,
                std::vector<std::unique_ptr<DecoderStage>>& stages) {
  const std::string type = type_of(j, where);
  if (type == "Sequence") {
    const json& items = field(j, "decoders", where);
    RINGLM_USER_CHECK(items.is_array(), where, ".decoders: expected an array");
    for (size_t i = 0; i < items.size(); ++i) {
      parse_into(items[i], where + ".decoders[" + std::to_string(i) + "]", fused, stages);
    }
    return;
  }
  if (type == "Replace") {
    Pattern p = parse_pattern(field(j, "pattern", where), where + ".pattern");
    RINGLM_USER_CHECK(!fused || (p.is_literal && !p.literal.empty()), where,
                      ": a Replace decoder with a regex after Fuse is not supported");
    stages.push_back(
        std::make_unique<ReplaceStage>(std::move(p), get_string(j, "content", where), fused));
    return;
  }
  if (type == "ByteFallback") {
    RINGLM_USER_CHECK(!fused, where, ": ByteFallback after Fuse/ByteLevel is not supported");
    stages.push_back(std::make_unique<ByteFallbackStage>());
    return;
  }
  if (type == "Fuse") {
    if (!fused) stages.push_back(std::make_unique<FuseStage>());
    fused = true;
    return;
  }
  if (type == "Strip") {
    const std::string c = get_string(j, "content", where);
    RINGLM_USER_CHECK(!c.empty() && utf8_len(static_cast<unsigned char>(c[0])) == c.size(), where,
                      ".content: expected one character");
    size_t i = 0;
    const char32_t cp = next_cp(c, i);
    const int64_t start = get_int_or(j, "start", 0, where), stop = get_int_or(j, "stop", 0, where);
    RINGLM_USER_CHECK(start >= 0 && stop >= 0, where, ": start/stop must be >= 0");
    stages.push_back(std::make_unique<StripStage>(cp, static_cast<size_t>(start),
                                                  static_cast<size_t>(stop), fused));
    return;
  }
  if (type == "Metaspace") {
    std::string rep = get_string_or(j, "replacement", "\xE2\x96\x81", where);
    RINGLM_USER_CHECK(!rep.empty(), where, ".replacement: empty");
    bool drop_first = true;
    if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null()) {
      drop_first = get_string(j, "prepend_scheme", where) != "never";
    } else {
      drop_first = get_bool_or(j, "add_prefix_space", true, where);
    }
    stages.push_back(std::make_unique<MetaspaceStage>(std::move(rep), drop_first, fused));
    return;
  }
  if (type == "ByteLevel") {
    RINGLM_USER_CHECK(!fused, where, ": ByteLevel after Fuse is not supported");
    stages.push_back(std::make_unique<ByteLevelStage>());
    fused = true;
    return;
  }
  RINGLM_USER_CHECK(false, where, ": unsupported decoder type '", type, "'");
}

}  // namespace

Decoder Decoder::parse(const json& j, const std::string& where) {
  Decoder d;
  if (j.is_null()) {
    d.stages.push_back(std::make_unique<JoinSpacesStage>());
    return d;
  }
  bool fused = false;
  parse_into(j, where, fused, d.stages);
  return d;
}

Decoder Decoder::clone() const {
  Decoder d;
  for (const auto& s : stages) d.stages.push_back(s->clone());
  return d;
}

void DecodeStream::run(size_t stage, std::string&& s, std::string& sink) {
  if (stage == d_.stages.size()) {
    sink += s;
    return;
  }
  std::vector<std::string> out;
  d_.stages[stage]->push(std::move(s), out);
  for (auto& o : out) run(stage + 1, std::move(o), sink);
}

std::string DecodeStream::push(std::string token) {
  std::string sink;
  run(0, std::move(token), sink);
  return sink;
}

std::string DecodeStream::flush() {
  std::string sink;
  for (size_t k = 0; k < d_.stages.size(); ++k) {
    std::vector<std::string> out;
    d_.stages[k]->flush(out);
    for (auto& o : out) run(k + 1, std::move(o), sink);
  }
  return sink;
}

}  // namespace ringlm::tok
