#include "tokenizer/jinja/template.h"

#include "tokenizer/jinja/parser.h"

namespace ringlm::jinja {

Template Template::parse(std::string_view source) {
  Template t;
  t.body_ = std::make_shared<const std::vector<StmtPtr>>(parse_template(source));
  return t;
}

std::string Template::render(const nlohmann::ordered_json& context,
                             const RenderOptions& options) const {
  Interp in(options.limits, options.now.value_or(std::chrono::system_clock::now()));
  try {
    if (!context.is_object()) type_error("template context must be a JSON object");
    std::vector<std::pair<std::string, Value>> vars;
    for (auto it = context.begin(); it != context.end(); ++it)
      vars.emplace_back(it.key(), from_json(it.value()));
    return in.render(*body_, vars);
  } catch (const Fault& f) {
    throw TemplateError(f.kind(), in.line(), f.what());
  }
}

}  // namespace ringlm::jinja
