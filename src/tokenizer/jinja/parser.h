// Recursive-descent parser: tokens -> statement list, following jinja2 3.1's grammar and operator
// precedence (filters bind tighter than arithmetic, `not` looser than comparisons, ...).
#pragma once

#include <string_view>
#include <vector>

#include "tokenizer/jinja/ast.h"

namespace ringlm::jinja {

// Throws TemplateError(Syntax) with the offending line.
std::vector<StmtPtr> parse_template(std::string_view source);

// jinja2 resolves filter and test names when compiling, except inside `if` statements and
// conditional expressions; throws TemplateError(Syntax) for an unknown name elsewhere.
void check_filter_and_test_names(const std::vector<StmtPtr>& body);

}  // namespace ringlm::jinja
