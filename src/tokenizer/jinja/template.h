// Jinja2 templates as Hugging Face chat templates use them.
//
// ringlm::jinja renders a template byte-for-byte like transformers does: jinja2 3.1's
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the loopcontrols and
// `generation` extensions, transformers' `tojson` filter (json.dumps with ensure_ascii=False) and
// the `raise_exception` / `strftime_now` globals. Values follow Python's data model (str() and
// repr() of lists, dicts, floats, None/True/False; Undefined prints as ""; dicts keep key order).
//
//   auto t = ringlm::jinja::Template::parse(source);          // throws TemplateError (syntax)
//   std::string s = t.render({{"messages", msgs}, {"add_generation_prompt", true}});
//
// Errors: TemplateError (a ringlm::Error) with the template line; raise_exception(msg) gives
// kind() == ErrorKind::Raised and detail() == msg. Any input, however hostile, ends in output or
// a TemplateError: recursion, string sizes, list sizes and work are bounded by RenderLimits.
//
// Not supported (they raise TemplateError): {% extends/include/import %} (no loader), the
// filters striptags/random/filesizeformat/urlencode/urlize/wordwrap/xmlattr/format, printf-style
// `%` on strings, str.format specs, \N{...} escapes, non-ASCII identifiers.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/jinja/errors.h"
#include "tokenizer/jinja/interp.h"

namespace ringlm::jinja {

struct RenderOptions {
  RenderLimits limits;
  // The clock strftime_now reads (local time); unset means the current time.
  std::optional<std::chrono::system_clock::time_point> now;
};

class Template {
 public:
  // Parses a template; throws TemplateError (ErrorKind::Syntax) with the line of the problem.
  static Template parse(std::string_view source);

  // Renders with the given top-level variables (a JSON object; ordered_json keeps key order,
  // which `tojson` and dict iteration expose). Throws TemplateError.
  std::string render(const nlohmann::ordered_json& context,
                     const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const std::vector<StmtPtr>> body_;
};

}  // namespace ringlm::jinja
